// The C API: return codes, rsg_last_error, metadata, latest/restart.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "resurgo/resurgo.h"
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
