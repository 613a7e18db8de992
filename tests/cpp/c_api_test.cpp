// The C API: return codes, rsg_last_error, metadata, latest/restart, and
// the lists (versions, describe) and persist.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "levels_in_temp_dir.h"

namespace {

using CApiTest = LevelsInTempDirTest;

TEST_F(CApiTest, FiveCallsCheckpointAndRestart) {
  std::vector<double> u(1000, 1.5);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  int version = 0;
  EXPECT_EQ(rsg_latest(store, &version), RSG_ENOTFOUND);
  ASSERT_EQ(rsg_protect(store, 1, u.data(), u.size() * sizeof(double), "u"), RSG_OK);
  const char meta[] = "step=10";
  ASSERT_EQ(rsg_set_metadata(store, meta, sizeof meta), RSG_OK);
  ASSERT_EQ(rsg_checkpoint(store, 10), RSG_OK);
  ASSERT_EQ(rsg_wait(store, RSG_ALL, RSG_L4), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_close(store), RSG_OK);

  std::vector<double> fresh(1000, 0.0);
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK);
  ASSERT_EQ(rsg_protect(store, 1, fresh.data(), fresh.size() * sizeof(double), "u"), RSG_OK);
  ASSERT_EQ(rsg_latest(store, &version), RSG_OK);
  EXPECT_EQ(version, 10);
  int restored = -1;
  ASSERT_EQ(rsg_restart(store, RSG_LATEST, &restored), RSG_OK) << rsg_last_error();
  EXPECT_EQ(restored, 10);
  EXPECT_EQ(fresh, u);
  char buffer[64] = {};
  size_t bytes = 0;
  EXPECT_EQ(rsg_get_metadata(store, buffer, 2, &bytes), RSG_EINVAL);
  EXPECT_EQ(bytes, sizeof meta);
  ASSERT_EQ(rsg_get_metadata(store, buffer, sizeof buffer, &bytes), RSG_OK);
  EXPECT_STREQ(buffer, meta);
  EXPECT_EQ(rsg_close(store), RSG_OK);
}

TEST_F(CApiTest, VersionStatsAndRestartReport) {
  setenv("RESURGO_PERSISTENT_EVERY", "2", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "stats", &store), RSG_OK) << rsg_last_error();
  unsetenv("RESURGO_PERSISTENT_EVERY");
  std::vector<double> u(4096, 1.5);
  ASSERT_EQ(rsg_protect(store, 0, u.data(), u.size() * sizeof(double), "u"), RSG_OK);
  rsg_restart_report report{};
  ASSERT_EQ(rsg_last_restart(store, &report), RSG_OK);
  EXPECT_EQ(report.version, -1);  // none yet
  ASSERT_EQ(rsg_checkpoint(store, 1), RSG_OK);
  ASSERT_EQ(rsg_checkpoint(store, 2), RSG_OK);
  ASSERT_EQ(rsg_wait(store, 2, RSG_L4), RSG_OK) << rsg_last_error();
  rsg_version_stats stats{};
  ASSERT_EQ(rsg_stats(store, 1, &stats), RSG_OK) << rsg_last_error();
  EXPECT_EQ(stats.version, 1);
  EXPECT_STREQ(stats.capture, "copy");
  EXPECT_EQ(stats.bytes, u.size() * sizeof(double));
  EXPECT_GE(stats.seconds_to_level[RSG_L2], 0.0);
  EXPECT_EQ(stats.seconds_to_level[RSG_L4], -1.0);  // only every 2nd checkpoint goes to L4
  EXPECT_GT(stats.stored_bytes[RSG_L2], 0);
  EXPECT_EQ(stats.stored_bytes[RSG_L3], -1);
  EXPECT_EQ(stats.failed, 0);
  ASSERT_EQ(rsg_stats(store, 2, &stats), RSG_OK);
  EXPECT_GE(stats.seconds_to_level[RSG_L4], stats.seconds_to_level[RSG_L2]);
  EXPECT_EQ(rsg_stats(store, 3, &stats), RSG_ENOTFOUND);
  EXPECT_NE(std::string(rsg_last_error()).find("version 3"), std::string::npos);
  int restored = -1;
  ASSERT_EQ(rsg_restart(store, RSG_LATEST, &restored), RSG_OK);
  ASSERT_EQ(rsg_last_restart(store, &report), RSG_OK);
  EXPECT_EQ(report.version, 2);
  EXPECT_EQ(report.level, RSG_L2);
  EXPECT_EQ(report.bytes, u.size() * sizeof(double));
  EXPECT_EQ(report.skipped, 0);
  EXPECT_EQ(rsg_stats(nullptr, 1, &stats), RSG_EINVAL);
  EXPECT_EQ(rsg_close(store), RSG_OK);
}

// Two versions: 1 on L2 only, 2 on L2 and L4 (persistent.every = 2).
class CApiListsTest : public CApiTest {
 protected:
  void SetUp() override {
    CApiTest::SetUp();
    setenv("RESURGO_PERSISTENT_EVERY", "2", 1);
    ASSERT_EQ(rsg_open(nullptr, "lists", &store), RSG_OK) << rsg_last_error();
    unsetenv("RESURGO_PERSISTENT_EVERY");
    ASSERT_EQ(rsg_protect(store, 0, u.data(), u.size() * sizeof(double), "u"), RSG_OK);
    ASSERT_EQ(rsg_checkpoint(store, 1), RSG_OK);
    ASSERT_EQ(rsg_checkpoint(store, 2), RSG_OK);
    ASSERT_EQ(rsg_wait(store, RSG_ALL, RSG_L2), RSG_OK) << rsg_last_error();
    ASSERT_EQ(rsg_wait(store, 2, RSG_L4), RSG_OK) << rsg_last_error();
  }
  void TearDown() override {
    EXPECT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
    CApiTest::TearDown();
  }
  // The store's versions, through the size query and the copy.
  std::vector<rsg_version_info> versions() {
    size_t count = 0;
    EXPECT_EQ(rsg_versions(store, nullptr, 0, &count), RSG_EINVAL);
    std::vector<rsg_version_info> list(count);
    EXPECT_EQ(rsg_versions(store, list.data(), list.size(), &count), RSG_OK) << rsg_last_error();
    EXPECT_EQ(count, list.size());
    return list;
  }
  std::vector<double> u = std::vector<double>(512, 2.5);
  rsg_store* store = nullptr;
};

TEST_F(CApiListsTest, VersionsGiveTheLevelsHoldingEach) {
  const std::vector<rsg_version_info> list = versions();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].version, 1);
  EXPECT_EQ(list[1].version, 2);
  for (const rsg_version_info& info : list) {
    EXPECT_EQ(info.pending, 0) << "version " << info.version;
    EXPECT_EQ(info.levels[RSG_L2], 1) << "version " << info.version;
  }
  EXPECT_EQ(list[0].levels[RSG_L4], 0);  // only every 2nd checkpoint goes to L4
  EXPECT_EQ(list[1].levels[RSG_L4], 1);
  EXPECT_EQ(list[1].levels[RSG_L0] + list[1].levels[RSG_L1] + list[1].levels[RSG_L3], 0);
}

TEST_F(CApiListsTest, VersionsRefuseATooSmallArrayAndCopyNothing) {
  rsg_version_info one{};
  one.version = -7;
  size_t count = 0;
  EXPECT_EQ(rsg_versions(store, &one, 1, &count), RSG_EINVAL);
  EXPECT_EQ(count, 2u);  // what to ask for next
  EXPECT_EQ(one.version, -7);
  const std::string message = rsg_last_error();
  EXPECT_NE(message.find("store 'lists' holds 2 versions"), std::string::npos) << message;
  EXPECT_NE(message.find("capacity of 1"), std::string::npos) << message;
}

TEST_F(CApiListsTest, VersionsRefuseNullArguments) {
  rsg_version_info list[2];
  size_t count = 5;
  EXPECT_EQ(rsg_versions(nullptr, list, 2, &count), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("rsg_versions"), std::string::npos);
  EXPECT_EQ(rsg_versions(store, list, 2, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_versions(store, nullptr, 2, &count), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("out is NULL"), std::string::npos);
  EXPECT_EQ(count, 0u);
}

TEST_F(CApiListsTest, PersistCopiesAVersionToAnotherLevel) {
  ASSERT_EQ(rsg_persist(store, 1, RSG_L4), RSG_OK) << rsg_last_error();
  const std::vector<rsg_version_info> list = versions();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].levels[RSG_L4], 1);
  ASSERT_EQ(rsg_persist(store, 1, RSG_L4), RSG_OK) << "a second persist has nothing to do";
}

TEST_F(CApiListsTest, PersistRefusesAMissingVersionABadLevelAndNull) {
  EXPECT_EQ(rsg_persist(store, 7, RSG_L4), RSG_ENOTFOUND);
  EXPECT_NE(std::string(rsg_last_error()).find("version 7"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(rsg_persist(store, 1, RSG_L3), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("level 3"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(rsg_persist(nullptr, 1, RSG_L4), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("rsg_persist"), std::string::npos);
}

// Version 5 of "described": a host region with a dtype and shape (through
// C++, since rsg_protect records neither) whose label has the longest
// length allowed, and a managed region (host memory serves under the host
// backend: the kind is what protect_managed says).
class CApiDescribeTest : public CApiTest {
 protected:
  void SetUp() override {
    CApiTest::SetUp();
    resurgo::Store writer("described", resurgo::Config::load("", {{"device.backend", "host"}}));
    writer.protect(3, field.data(), field.size() * sizeof(double), long_label, {"float64", {2, 3}});
    writer.protect_managed(4, counts.data(), counts.size() * sizeof(std::int32_t), "counts");
    writer.checkpoint(5);
    writer.close();
    ASSERT_EQ(rsg_open(nullptr, "described", &store), RSG_OK) << rsg_last_error();
  }
  void TearDown() override {
    EXPECT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
    CApiTest::TearDown();
  }
  const std::string long_label = std::string(255, 'f');
  std::vector<double> field = std::vector<double>(6, 1.0);
  std::vector<std::int32_t> counts = std::vector<std::int32_t>(4, 7);
  rsg_store* store = nullptr;
};

TEST_F(CApiDescribeTest, GivesEachRegionsLabelKindBytesDtypeAndShape) {
  size_t count = 0;
  EXPECT_EQ(rsg_describe(store, 5, nullptr, 0, &count), RSG_EINVAL);  // the size query
  ASSERT_EQ(count, 2u);
  std::vector<rsg_region_description> regions(count);
  ASSERT_EQ(rsg_describe(store, 5, regions.data(), regions.size(), &count), RSG_OK) << rsg_last_error();
  EXPECT_EQ(regions[0].id, 3);
  EXPECT_EQ(regions[0].label, long_label);
  EXPECT_EQ(regions[0].kind, RSG_KIND_HOST);
  EXPECT_EQ(regions[0].bytes, 6 * sizeof(double));
  EXPECT_STREQ(regions[0].dtype, "float64");
  ASSERT_EQ(regions[0].ndims, 2);
  EXPECT_EQ(regions[0].shape[0], 2);
  EXPECT_EQ(regions[0].shape[1], 3);
  EXPECT_EQ(regions[1].id, 4);
  EXPECT_STREQ(regions[1].label, "counts");
  EXPECT_EQ(regions[1].kind, RSG_KIND_MANAGED);
  EXPECT_EQ(regions[1].bytes, 4 * sizeof(std::int32_t));
  EXPECT_STREQ(regions[1].dtype, "");
  EXPECT_EQ(regions[1].ndims, 0);
}

TEST_F(CApiDescribeTest, RefusesATooSmallArrayAndCopiesNothing) {
  rsg_region_description one{};
  one.id = -7;
  size_t count = 0;
  EXPECT_EQ(rsg_describe(store, 5, &one, 1, &count), RSG_EINVAL);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(one.id, -7);
  EXPECT_NE(std::string(rsg_last_error()).find("version 5 of store 'described' has 2 regions"), std::string::npos)
      << rsg_last_error();
}

TEST_F(CApiDescribeTest, RefusesAMissingVersionAndNullArguments) {
  rsg_region_description regions[2];
  size_t count = 9;
  EXPECT_EQ(rsg_describe(store, 6, regions, 2, &count), RSG_ENOTFOUND);
  EXPECT_NE(std::string(rsg_last_error()).find("version 6"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(rsg_describe(nullptr, 5, regions, 2, &count), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("rsg_describe"), std::string::npos);
  EXPECT_EQ(rsg_describe(store, 5, regions, 2, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_describe(store, 5, nullptr, 2, &count), RSG_EINVAL);
}

TEST_F(CApiTest, ErrorsReturnCodesAndMessages) {
  rsg_store* store = nullptr;
  EXPECT_EQ(rsg_open(nullptr, nullptr, &store), RSG_EINVAL);
  EXPECT_EQ(rsg_open(nullptr, "a/b", &store), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("a/b"), std::string::npos);
  EXPECT_EQ(rsg_open((dir.path() + "/missing.toml").c_str(), "c", &store), RSG_ECONFIG);
  setenv("RESURGO_LOCAL_KEEP", "many", 1);
  EXPECT_EQ(rsg_open(nullptr, "c", &store), RSG_ECONFIG);
  EXPECT_NE(std::string(rsg_last_error()).find("RESURGO_LOCAL_KEEP"), std::string::npos);
  unsetenv("RESURGO_LOCAL_KEEP");
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK);
  double x = 1;
  EXPECT_EQ(rsg_checkpoint(store, 1), RSG_EINVAL);
  EXPECT_EQ(rsg_protect(store, 0, nullptr, 8, "x"), RSG_EINVAL);
  EXPECT_EQ(rsg_protect(store, 0, &x, 0, "x"), RSG_EINVAL);
  EXPECT_EQ(rsg_protect(store, 0, &x, sizeof x, nullptr), RSG_OK);  // label defaults to region-0
  EXPECT_EQ(rsg_protect(store, 1, &x, sizeof x, "region-0"), RSG_EINVAL);
  EXPECT_EQ(rsg_unprotect(store, 5), RSG_ENOTFOUND);
  EXPECT_EQ(rsg_wait(store, 3, RSG_L2), RSG_ENOTFOUND);
  EXPECT_EQ(rsg_restart(store, RSG_LATEST, nullptr), RSG_ENOTFOUND);
  EXPECT_EQ(rsg_checkpoint(store, -3), RSG_EINVAL);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  EXPECT_EQ(rsg_close(nullptr), RSG_EINVAL);
}

}  // namespace
