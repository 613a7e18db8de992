// capture.mode = "delta": what each version holds (base, blocks, bytes),
// when a version must be full, and that restart rebuilds every version bit
// for bit from its chain, under every tracking method this kernel offers.
// Reading chains is tested on hand-made files in chain_restore_test.cpp.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "io/fault_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "version_stats.h"
#include "track/tracker_choice.h"

namespace resurgo {
namespace {

const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// Page-aligned anonymous memory, so tests can name pages.
class Pages {
 public:
  explicit Pages(std::size_t count) : bytes_(count * kPage) {
    void* memory = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    data_ = static_cast<std::byte*>(memory);
  }
  ~Pages() { ::munmap(data_, bytes_); }
  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  void write(std::size_t page, int value) { data_[page * kPage + 8] = static_cast<std::byte>(value); }
  std::vector<std::byte> copy() const { return {data_, data_ + bytes_}; }
  bool equals(const std::vector<std::byte>& saved) const { return std::memcmp(data_, saved.data(), bytes_) == 0; }

 private:
  std::size_t bytes_;
  std::byte* data_;
};

bool method_available(const std::string& method) {
  try {
    Config config;
    config.set("track.method", method);
    track::open_tracker(config.track.method, Logger("probe", LogLevel::kOff));
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

class DeltaCaptureTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!method_available(GetParam())) GTEST_SKIP() << "track.method = " << GetParam() << " is not available here";
  }
  Config config(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.every", "0"},
                                               {"local.keep", "0"},
                                               {"capture.mode", "delta"},
                                               {"track.method", GetParam()},
                                               {"track.granularity", std::to_string(kPage)},
                                               {"pipeline.chunk_size", "64KiB"},
                                               {"log.level", "off"}};
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }

  TempDir dir;
};

TEST_P(DeltaCaptureTest, ADeltaHoldsExactlyTheWrittenPagesAndNamesItsBase) {
  Pages state(64);
  Store store("d", config());
  store.protect(0, state.data(), state.bytes(), "state");
  state.write(0, 1);
  store.checkpoint(1);
  const VersionStats full = stats_of(store, 1);
  EXPECT_EQ(full.base_version, -1);
  EXPECT_EQ(full.capture, "copy");
  EXPECT_EQ(full.captured_bytes, state.bytes());

  for (std::size_t page : {3u, 17u, 40u}) state.write(page, 7);
  store.checkpoint(2);
  const VersionStats delta = stats_of(store, 2);
  EXPECT_EQ(delta.base_version, 1);
  EXPECT_EQ(delta.capture, "delta");
  EXPECT_EQ(delta.captured_bytes, 3 * kPage);
  EXPECT_EQ(delta.dirty_bytes, 3 * kPage);
  EXPECT_EQ(delta.granularity_bytes, kPage);
  EXPECT_EQ(delta.tracker, GetParam());
  EXPECT_LT(delta.at(kL2)->stored_bytes, 4 * kPage) << "the delta file holds more than the written pages";

  store.checkpoint(3);  // nothing written
  const VersionStats empty = stats_of(store, 3);
  EXPECT_EQ(empty.base_version, 2);
  EXPECT_EQ(empty.captured_bytes, 0u);
}

TEST_P(DeltaCaptureTest, RestartRebuildsEveryVersionOfAChainBitForBit) {
  Pages state(256);
  std::mt19937 random(11);
  std::vector<std::vector<std::byte>> saved;
  {
    Store store("d", config({{"delta.full_every", "100"}}));
    store.protect(0, state.data(), state.bytes(), "state");
    for (int version = 0; version < 11; ++version) {
      for (int i = 0; i < 9; ++i) state.write(random() % 256, static_cast<int>(random()));
      store.checkpoint(version);
      saved.push_back(state.copy());
    }
    store.wait();
    EXPECT_EQ(stats_of(store, 10).base_version, 9);
  }
  Store reopened("d", config());
  reopened.protect(0, state.data(), state.bytes(), "state");
  std::memset(state.data(), 0, state.bytes());
  EXPECT_EQ(reopened.restart(), 10);
  EXPECT_TRUE(state.equals(saved[10]));
  EXPECT_EQ(reopened.last_restart().chain.size(), 11u);
  for (int version : {0, 4, 9}) {
    EXPECT_EQ(reopened.restart(version), version);
    EXPECT_TRUE(state.equals(saved[version])) << "version " << version;
  }
}

TEST_P(DeltaCaptureTest, WritesByOtherThreadsAreInTheNextDelta) {
  Pages state(32);
  Store store("d", config());
  store.protect(0, state.data(), state.bytes(), "state");
  store.checkpoint(1);
  std::thread writer([&] { state.write(5, 9); state.write(30, 9); });
  writer.join();
  store.checkpoint(2);
  EXPECT_EQ(stats_of(store, 2).captured_bytes, 2 * kPage);
  const std::vector<std::byte> expected = state.copy();
  std::memset(state.data(), 0, state.bytes());
  EXPECT_EQ(store.restart(), 2);
  EXPECT_TRUE(state.equals(expected));
}

TEST_P(DeltaCaptureTest, AForkedChildOfTheApplicationNeitherCrashesNorLeaksWritesIntoTheParentsDelta) {
  Pages state(32);
  Store store("d", config());
  store.protect(0, state.data(), state.bytes(), "state");
  store.checkpoint(1);
  const pid_t child = ::fork();
  if (child == 0) {
    for (std::size_t page = 0; page < 32; ++page) state.write(page, 3);  // its own copy
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child died writing tracked memory";
  state.write(12, 4);
  store.checkpoint(2);
  const std::uint64_t captured = stats_of(store, 2).captured_bytes;
  EXPECT_GE(captured, kPage);  // the page the parent wrote, at least
  const std::vector<std::byte> expected = state.copy();
  std::memset(state.data(), 0, state.bytes());
  EXPECT_EQ(store.restart(), 2);
  EXPECT_TRUE(state.equals(expected));
}

std::string method_test_name(const ::testing::TestParamInfo<const char*>& method) {
  return method.param == std::string("soft-dirty") ? "soft_dirty" : method.param;
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, DeltaCaptureTest, ::testing::Values("uffd", "soft-dirty", "mprotect", "hash"),
                         method_test_name);

// ------------------------------------------------- when a version is full

class DeltaChainTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"}, {"persistent.path", dir.path() + "/l4"},
                                               {"persistent.every", "0"}, {"local.keep", "0"},
                                               {"capture.mode", "delta"}, {"track.method", "hash"},
                                               {"log.level", "off"}};
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  static std::vector<int> bases(Store& store) {
    store.wait();
    std::vector<int> list;
    for (const VersionStats& stats : store.stats()) list.push_back(stats.base_version);
    return list;
  }
  TempDir dir;
};

TEST_F(DeltaChainTest, AFullVersionEveryFullEveryCheckpoints) {
  Pages state(8);
  Store store("d", config({{"delta.full_every", "3"}}));
  store.protect(0, state.data(), state.bytes(), "state");
  for (int version = 1; version <= 7; ++version) store.checkpoint(version);
  EXPECT_EQ(bases(store), (std::vector<int>{-1, 1, 2, -1, 4, 5, -1}));
}

TEST_F(DeltaChainTest, AVersionGoingToALevelThatSkipsCheckpointsIsFull) {
  Pages state(8);
  Store store("d", config({{"persistent.every", "2"}}));
  store.protect(0, state.data(), state.bytes(), "state");
  for (int version = 1; version <= 5; ++version) store.checkpoint(version);
  EXPECT_EQ(bases(store), (std::vector<int>{-1, -1, 2, -1, 4}));
}

TEST_F(DeltaChainTest, AResizedOrUnprotectedRegionMakesTheNextVersionFull) {
  Pages a(8);
  Pages b(8);
  Store store("d", config());
  store.protect(0, a.data(), a.bytes(), "a");
  store.protect(1, b.data(), b.bytes(), "b");
  store.checkpoint(1);
  store.checkpoint(2);
  store.unprotect(1);
  store.protect(1, b.data(), b.bytes() / 2, "b");
  store.checkpoint(3);
  store.checkpoint(4);
  store.unprotect(1);
  store.checkpoint(5);
  EXPECT_EQ(bases(store), (std::vector<int>{-1, 1, -1, 3, -1}));
}

TEST_F(DeltaChainTest, TheFirstVersionAfterARestartIsFull) {
  Pages state(8);
  Store store("d", config());
  store.protect(0, state.data(), state.bytes(), "state");
  store.checkpoint(1);
  store.checkpoint(2);
  EXPECT_EQ(store.restart(), 2);
  state.write(1, 1);
  store.checkpoint(3);
  EXPECT_EQ(bases(store), (std::vector<int>{-1, 1, -1}));
}

TEST_F(DeltaChainTest, AFailedVersionIsNeverABase) {
  auto env = std::make_shared<FaultEnv>();
  Pages state(8);
  Store store("d", config(), env);
  store.protect(0, state.data(), state.bytes(), "state");
  store.checkpoint(1);
  store.wait(1, kL2);
  env->inject({FaultEnv::Op::kAppend, EIO, "", 0, 1, false});
  state.write(2, 2);
  store.checkpoint(2);
  EXPECT_THROW(store.wait(2, kL2), StorageError);
  state.write(3, 3);
  store.checkpoint(3);
  store.wait();
  const std::vector<VersionStats> all = store.stats();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].base_version, 1);
  EXPECT_EQ(all[2].base_version, -1) << "version 3 builds on version 2, which was never written";
  const std::vector<std::byte> expected = state.copy();
  std::memset(state.data(), 0, state.bytes());
  EXPECT_EQ(store.restart(), 3);
  EXPECT_TRUE(state.equals(expected));
}

TEST_F(DeltaChainTest, TheTunerGrowsTheBlockOnContiguousWrites) {
  Pages state(1024);
  Store store("d", config({{"track.method", "auto"}, {"track.granularity", "auto"}}));
  store.protect(0, state.data(), state.bytes(), "state");
  store.checkpoint(0);
  for (int version = 1; version <= 12; ++version) {
    for (std::size_t page = 256; page < 512; ++page) state.write(page, version);
    store.checkpoint(version);
  }
  store.wait();
  const VersionStats last = store.stats().back();
  EXPECT_GT(last.granularity_bytes, kPage);
  EXPECT_EQ(last.captured_bytes, 256 * kPage);  // a settled block fits the slab exactly
}

TEST_F(DeltaChainTest, FileBackedMemoryFallsBackToHash) {
  const std::string path = dir.path() + "/mapped";
  write_file(path, std::vector<std::byte>(8 * kPage));
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  void* memory = ::mmap(nullptr, 8 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(memory, MAP_FAILED);
  auto* bytes = static_cast<std::byte*>(memory);
  {
    Store store("d", config({{"track.method", "auto"}}));
    store.protect(0, bytes, 8 * kPage, "mapped");
    store.checkpoint(1);
    bytes[3 * kPage] = std::byte{5};
    store.checkpoint(2);
    store.wait();
    const VersionStats delta = store.stats().back();
    EXPECT_EQ(delta.tracker, "hash");
    EXPECT_EQ(delta.base_version, 1);
    EXPECT_EQ(delta.captured_bytes, kPage);
  }
  ::munmap(memory, 8 * kPage);
}

TEST_F(DeltaChainTest, AnUnavailableMethodIsAConfigErrorNamingIt) {
  Pages state(8);
  for (const char* method : {"uffd", "soft-dirty", "mprotect"}) {
    if (method_available(method)) continue;
    try {
      Store store("d", config({{"track.method", method}}));
      FAIL() << method << " is unavailable but the store opened";
    } catch (const ConfigError& error) {
      EXPECT_NE(std::string(error.what()).find(method), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(Config::load("", {{"track.granularity", "3KiB"}}), ConfigError);
  EXPECT_THROW(Config::load("", {{"track.method", "dirty"}}), ConfigError);
  EXPECT_THROW(Config::load("", {{"delta.full_every", "0"}}), ConfigError);
}

}  // namespace
}  // namespace resurgo
