// Appicpr's calls (resurgo/appic.h): cycles, versions, read-back after a
// restart of the program (finalize, then fresh arrays), and the errors.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "resurgo/appic.h"
#include "test_util.h"

namespace {

constexpr std::size_t kPage = 4096;

std::vector<double> pattern(std::size_t n, double seed) {
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = seed + static_cast<double>(i) * 0.25;
  return values;
}

// The arrays are members: they outlive TearDown, which ends a cycle a test
// left open (that close may checkpoint them) and closes the stores.
class AppicTest : public ::testing::Test {
 protected:
  void TearDown() override {
    rsg_appic_close();
    EXPECT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();
  }

  // One cycle writing every array given (registered first).
  void write_cycle(const std::vector<std::vector<double>*>& arrays) {
    ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK) << rsg_last_error();
    for (auto* array : arrays) {
      ASSERT_EQ(rsg_appic_register(array->data(), array->size() * sizeof(double)), RSG_OK) << rsg_last_error();
    }
    for (auto* array : arrays) ASSERT_EQ(rsg_appic_write(array->data()), RSG_OK) << rsg_last_error();
    ASSERT_EQ(rsg_appic_close(), RSG_OK) << rsg_last_error();
  }

  // As a restarted program: a cycle reading into the arrays; returns the version read.
  int read_cycle(const std::vector<std::vector<double>*>& arrays) {
    EXPECT_EQ(rsg_appic_open(path.c_str()), RSG_OK) << rsg_last_error();
    for (auto* array : arrays) {
      EXPECT_EQ(rsg_appic_register(array->data(), array->size() * sizeof(double)), RSG_OK) << rsg_last_error();
    }
    for (auto* array : arrays) EXPECT_EQ(rsg_appic_read(array->data()), RSG_OK) << rsg_last_error();
    int version = -1;
    EXPECT_EQ(rsg_appic_version(&version), RSG_OK) << rsg_last_error();
    EXPECT_EQ(rsg_appic_close(), RSG_OK) << rsg_last_error();
    return version;
  }

  std::uintmax_t version_file_bytes(int version) const {
    char name[32];
    std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, 0);
    return std::filesystem::file_size(path + "/" + name);
  }

  TempDir dir;
  std::string path = dir.path() + "/state.dat";
  std::vector<double> u = pattern(100, 0.0), v = pattern(50, 1.0);
  std::vector<double> u2, v2, other = std::vector<double>(100);
};

TEST_F(AppicTest, CycleWritesAndReadsBackBitForBit) {
  u = pattern(10000, 1.0);
  v = pattern(3000, -7.0);
  write_cycle({&u, &v});
  ASSERT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();
  EXPECT_TRUE(std::filesystem::is_directory(path)) << "the store is the directory named by the path";

  u2.resize(u.size());
  v2.resize(v.size());
  EXPECT_EQ(read_cycle({&u2, &v2}), 1);
  EXPECT_EQ(u2, u);
  EXPECT_EQ(v2, v);
}

// Two cycles of 64 pages; the second after writing 2 of them. In delta
// mode, the appic default, whatever RESURGO_CAPTURE_MODE the run was given.
class AppicDeltaTest : public AppicTest {
 protected:
  void SetUp() override {
    if (const char* mode = ::getenv("RESURGO_CAPTURE_MODE")) saved_mode_ = mode;
    ::unsetenv("RESURGO_CAPTURE_MODE");
  }
  void TearDown() override {
    AppicTest::TearDown();
    if (!saved_mode_.empty()) ::setenv("RESURGO_CAPTURE_MODE", saved_mode_.c_str(), 1);
  }
  void two_cycles() {
    u = pattern(kDoubles, 3.0);
    write_cycle({&u});
    for (std::size_t page : {3, 40}) u[page * kPage / sizeof(double) + 5] = -1.0;
    write_cycle({&u});
  }
  static constexpr std::size_t kDoubles = 64 * kPage / sizeof(double);
  std::vector<double> w = pattern(kDoubles, -5.0), w2 = std::vector<double>(kDoubles);

 private:
  std::string saved_mode_;
};

TEST_F(AppicDeltaTest, TheSecondCycleWritesOnlyTheChangedPages) {
  two_cycles();
  EXPECT_LT(version_file_bytes(2), version_file_bytes(1) / 4)
      << "version 2 should hold only the 2 pages written since version 1";
}

TEST_F(AppicDeltaTest, ReadBackRebuildsTheNewestVersion) {
  two_cycles();
  ASSERT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();
  u2.resize(kDoubles);
  EXPECT_EQ(read_cycle({&u2}), 2);
  EXPECT_EQ(u2, u);
}

// Arrays u and w of 64 pages; the second cycle changes 2 pages of u and
// writes u alone. Before, such a close failed (RSG_ESTATE) and took nothing.
TEST_F(AppicDeltaTest, AnArrayNotWrittenInACycleAddsNothingToItsDelta) {
  u = pattern(kDoubles, 3.0);
  write_cycle({&u, &w});
  for (std::size_t page : {3, 40}) u[page * kPage / sizeof(double) + 5] = -1.0;
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_write(u.data()), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_appic_close(), RSG_OK) << rsg_last_error();
  EXPECT_LT(version_file_bytes(2), version_file_bytes(1) / 8)
      << "version 2 should hold the 2 pages of u written since version 1, nothing of w";

  ASSERT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();
  u2.resize(kDoubles);
  EXPECT_EQ(read_cycle({&u2, &w2}), 2);
  EXPECT_EQ(u2, u);
  EXPECT_EQ(w2, w);
}

TEST_F(AppicDeltaTest, ARestartedProgramContinuesTheNumbering) {
  two_cycles();
  ASSERT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();
  write_cycle({&u});
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  int version = -1;
  EXPECT_EQ(rsg_appic_version(&version), RSG_OK) << rsg_last_error();
  EXPECT_EQ(version, 3);
}

TEST_F(AppicTest, RegisteringAgainIsANoOpAndAnotherSizeIsRefused) {
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_register(u.data(), 800), RSG_OK);
  EXPECT_EQ(rsg_appic_register(u.data(), 800), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_appic_register(u.data(), 400), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("array1"), std::string::npos) << rsg_last_error();
  EXPECT_NE(std::string(rsg_last_error()).find("800 bytes, now with 400"), std::string::npos) << rsg_last_error();
}

TEST_F(AppicTest, WriteOfAnUnregisteredArrayIsRefused) {
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_register(u.data(), 800), RSG_OK);
  EXPECT_EQ(rsg_appic_write(other.data()), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("not registered"), std::string::npos) << rsg_last_error();
}

TEST_F(AppicTest, CloseWithAnArrayNotWrittenTakesTheVersionWithIt) {
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_register(u.data(), u.size() * sizeof(double)), RSG_OK);
  ASSERT_EQ(rsg_appic_register(v.data(), v.size() * sizeof(double)), RSG_OK);
  ASSERT_EQ(rsg_appic_write(u.data()), RSG_OK);
  EXPECT_EQ(rsg_appic_close(), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_appic_finalize(), RSG_OK) << rsg_last_error();

  u2.resize(u.size());
  v2.resize(v.size());
  EXPECT_EQ(read_cycle({&u2, &v2}), 1);
  EXPECT_EQ(u2, u);
  EXPECT_EQ(v2, v) << "an array not written in the cycle is still in its version";
}

TEST_F(AppicTest, ACycleThatWritesNothingTakesNoVersion) {
  write_cycle({&u});
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_register(u.data(), u.size() * sizeof(double)), RSG_OK);
  EXPECT_EQ(rsg_appic_close(), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  int version = -1;
  EXPECT_EQ(rsg_appic_version(&version), RSG_OK) << rsg_last_error();
  EXPECT_EQ(version, 1);
}

TEST_F(AppicTest, ReadWithNoCheckpointIsNotFound) {
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  ASSERT_EQ(rsg_appic_register(u.data(), 800), RSG_OK);
  EXPECT_EQ(rsg_appic_read(u.data()), RSG_ENOTFOUND);
  EXPECT_NE(std::string(rsg_last_error()).find("holds no checkpoint"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(rsg_appic_close(), RSG_OK) << "a read cycle takes no version";
}

TEST_F(AppicTest, CallsOutOfOrderAreStateErrors) {
  EXPECT_EQ(rsg_appic_register(u.data(), 800), RSG_ESTATE);
  EXPECT_EQ(rsg_appic_write(u.data()), RSG_ESTATE);
  EXPECT_EQ(rsg_appic_close(), RSG_ESTATE);
  ASSERT_EQ(rsg_appic_open(path.c_str()), RSG_OK);
  EXPECT_EQ(rsg_appic_open(path.c_str()), RSG_ESTATE) << "one file at a time";
  EXPECT_EQ(rsg_appic_finalize(), RSG_ESTATE) << "a cycle is open";
  ASSERT_EQ(rsg_appic_register(u.data(), 800), RSG_OK);
  ASSERT_EQ(rsg_appic_write(u.data()), RSG_OK);
  EXPECT_EQ(rsg_appic_read(u.data()), RSG_ESTATE) << "a cycle writes or reads, not both";
}

TEST_F(AppicTest, BadPathsAreRefused) {
  EXPECT_EQ(rsg_appic_open(nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_appic_open(""), RSG_EINVAL);
  EXPECT_EQ(rsg_appic_open((dir.path() + "/bad name").c_str()), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("bad name"), std::string::npos) << rsg_last_error();
}

}  // namespace
