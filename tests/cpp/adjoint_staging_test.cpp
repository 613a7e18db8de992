// Adjoint staging through the Store (docs/adjoint.md): the memory route,
// prefetch in restore order into room freed by discard, and the bad input
// and faults the issue names (unknown and repeated discards, restart of a
// discarded version, versions not written yet, a damaged file, a version
// larger than the memory level, a full memory level).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "base/units.h"
#include "capture/copy_capture.h"
#include "hook_env.h"
#include "io/fault_env.h"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "version_pattern.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

// Polls `condition` (background threads make it true) for up to 30 s.
class AdjointStagingTest : public ::testing::Test {
 protected:
  // 3 MiB of state: a version takes two 2 MiB pieces of the memory level.
  static constexpr std::size_t kValues = (3u << 20) / sizeof(double);

  Config config(std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.path", dir.path() + "/l4"},
                                               {"local.keep", "0"},
                                               {"persistent.every", "0"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::map<std::string, std::string> memory_only() {
    return {{"memory.every", "1"}, {"memory.keep", "0"}, {"local.every", "0"}, {"memory.capacity", "64MiB"}};
  }
  std::map<std::string, std::string> disk_with_prefetch(const std::string& capacity) {
    return {{"memory.capacity", capacity}};
  }
  void fill(int version) { fill_version_pattern(u, version); }
  bool holds_state_of(int version) const { return has_version_pattern(u, version, 4099); }
  void checkpoints(Store& store, int first, int last) {
    for (int version = first; version <= last; ++version) {
      fill(version);
      store.checkpoint(version);
    }
  }
  static bool in_memory(Store& store, int version) {
    for (const VersionInfo& info : store.versions()) {
      if (info.version == version) return !info.levels.empty() && info.levels.front() == kL1 && !info.pending;
    }
    return false;
  }
  std::string l2(int version) const {
    char name[64];
    std::snprintf(name, sizeof name, "/l2/s/v%010d.r%06d.rsg", version, 0);
    return dir.path() + name;
  }

  TempDir dir;
  std::vector<double> u = std::vector<double>(kValues);
};

TEST_F(AdjointStagingTest, AMemoryOnlyRouteRestartsFromMemoryAndWritesNoVersionFile) {
  Store store("s", config(memory_only()));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 3);
  store.wait(kAllVersions, kL1);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(holds_state_of(2));
  EXPECT_EQ(store.last_restart().level, kL1);
  EXPECT_EQ(store.latest(), 3);
  EXPECT_FALSE(fs::exists(dir.path() + "/l2/s"));  // made only when a version goes there
  EXPECT_THROW(store.wait(3, kL2), InvalidArgumentError);  // L2 is off
}

TEST_F(AdjointStagingTest, PrefetchFollowsTheRestoreOrderIntoTheRoomThatDiscardFrees) {
  Store store("s", config(disk_with_prefetch("8MiB")));  // room for two versions
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 5);
  store.wait();
  store.prefetch({5, 4, 3, 2, 1});
  for (int version = 5; version >= 1; --version) {
    ASSERT_TRUE(eventually([&] { return in_memory(store, version); })) << "version " << version;
    if (version >= 3) {
      EXPECT_FALSE(in_memory(store, version - 2)) << "no room for it yet";
    }
    fill(0);
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(holds_state_of(version));
    EXPECT_EQ(store.last_restart().level, kL1);
    store.discard(version);
  }
  store.close();  // waits for the removals the discards queued
  for (int version = 1; version <= 5; ++version) EXPECT_FALSE(fs::exists(l2(version))) << version;
}

// Restores that keep their version (Copy, not Move) leave it in memory: a
// copy needed later than the next version makes room for it, the one needed
// last (or never again) first.
TEST_F(AdjointStagingTest, APrefetchedCopyNeededLaterMakesRoomForTheNextVersion) {
  Store store("s", config(disk_with_prefetch("8MiB")));  // room for two versions
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 3);
  store.wait();
  store.prefetch({3, 1, 2, 3});
  ASSERT_TRUE(eventually([&] { return in_memory(store, 3) && in_memory(store, 1); }));
  EXPECT_EQ(store.restart(3), 3);
  ASSERT_TRUE(eventually([&] { return in_memory(store, 2); }));
  EXPECT_FALSE(in_memory(store, 3)) << "3 is needed after 1 and 2: it made room for 2";
  for (int version : {1, 2}) {
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(store.last_restart().level, kL1) << version;
  }
  ASSERT_TRUE(eventually([&] { return in_memory(store, 3); }));  // 1 is never needed again
  fill(0);
  EXPECT_EQ(store.restart(3), 3);
  EXPECT_TRUE(holds_state_of(3));
  EXPECT_EQ(store.last_restart().level, kL1);
}

TEST_F(AdjointStagingTest, VersionsNamedBeforeTheyAreWrittenAreFetchedOnceWritten) {
  Store store("s", config(disk_with_prefetch("64MiB")));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.prefetch({2, 1});
  checkpoints(store, 1, 2);
  EXPECT_TRUE(eventually([&] { return in_memory(store, 1) && in_memory(store, 2); }));
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(holds_state_of(1));
  EXPECT_EQ(store.last_restart().level, kL1);
}

TEST_F(AdjointStagingTest, DiscardAndRestartOfUnknownOrDiscardedVersionsFailClearly) {
  Store store("s", config(memory_only()));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 2);
  store.wait(kAllVersions, kL1);
  EXPECT_THROW(store.discard(7), NotFoundError);
  EXPECT_THROW(store.discard(-1), InvalidArgumentError);
  store.discard(2);
  EXPECT_THROW(store.discard(2), StateError);
  try {
    store.restart(2);
    FAIL() << "a discarded version was restarted";
  } catch (const NotFoundError& error) {
    EXPECT_NE(std::string(error.what()).find("discarded"), std::string::npos) << error.what();
  }
  EXPECT_THROW(store.prefetch({1, 2}), NotFoundError);
  EXPECT_EQ(store.latest(), 1);
  EXPECT_EQ(store.restart(), 1);
  EXPECT_TRUE(holds_state_of(1));
}

TEST_F(AdjointStagingTest, ADamagedFileIsReportedAtTheRestartWhichReadsTheNextLevel) {
  Store store("s", config({{"persistent.every", "1"}, {"persistent.keep", "0"}, {"memory.capacity", "64MiB"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 1);
  store.wait(1, kL4);
  flip_bit(l2(1), fs::file_size(l2(1)) / 2);
  store.prefetch({1});
  fill(0);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(holds_state_of(1));
  EXPECT_EQ(store.last_restart().level, kL4);
  EXPECT_FALSE(store.last_restart().skipped.empty());
  EXPECT_FALSE(in_memory(store, 1));  // a damaged copy never reaches memory
}

TEST_F(AdjointStagingTest, AnIoErrorDuringPrefetchIsReportedAtTheRestartWhichReadsTheNextLevel) {
  auto faults = std::make_shared<FaultEnv>();
  Store store("s", config({{"persistent.every", "1"}, {"persistent.keep", "0"}, {"memory.capacity", "64MiB"}}),
              faults);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 1);
  store.wait(1, kL4);
  faults->inject({FaultEnv::Op::kRead, EIO, "/l2/", 0, -1});
  store.prefetch({1});
  ASSERT_TRUE(eventually([&] { return faults->failures() > 0; }));
  fill(0);
  EXPECT_EQ(store.restart(1), 1);  // waits for the failing prefetch to settle
  EXPECT_TRUE(holds_state_of(1));
  EXPECT_EQ(store.last_restart().level, kL4);
  const std::vector<std::string>& skipped = store.last_restart().skipped;
  const auto names_the_prefetch = [](const std::string& line) {
    return line.find("prefetch from L2 failed") != std::string::npos;
  };
  EXPECT_TRUE(std::any_of(skipped.begin(), skipped.end(), names_the_prefetch)) << ::testing::PrintToString(skipped);
}

TEST_F(AdjointStagingTest, ADiscardedBaseStaysWhileAKeptDeltaBuildsOnIt) {
  Store store("s", config({{"capture.mode", "delta"}, {"track.method", "hash"}, {"delta.full_every", "10"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 3);
  store.wait();
  ASSERT_EQ(store.stats().back().base_version, 2);
  store.discard(1);
  store.discard(2);
  EXPECT_EQ(store.restart(), 3);  // the newest: drains the pipeline and the removals first
  EXPECT_TRUE(holds_state_of(3));
  EXPECT_TRUE(fs::exists(l2(1)) && fs::exists(l2(2))) << "the chain of version 3 was broken";
  store.discard(3);
  store.close();
  for (int version = 1; version <= 3; ++version) EXPECT_FALSE(fs::exists(l2(version))) << version;
}

// The crash campaign's failure (docs/reliability.md): version 2, a delta on
// 1, was durable at L2 and still on its way to L4 when 1 was discarded; the
// discard removed 1 from L4, where 2 then landed without its base.
TEST_F(AdjointStagingTest, ADiscardedBaseStaysOnALevelItsDeltaIsOnItsWayTo) {
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  auto env = std::make_shared<HookEnv>();
  env->before_create = [&](const std::string& path) {
    if (path.find("/l4/") == std::string::npos || path.find("0000000002") == std::string::npos) return;
    std::unique_lock lock(mutex);
    opened.wait(lock, [&] { return open; });  // holds version 2's copy to L4
  };
  Store store("s",
              config({{"capture.mode", "delta"}, {"track.method", "hash"}, {"persistent.every", "1"},
                      {"persistent.keep", "0"}}),
              env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  // Version 1 is on L4 before version 2 is taken: taken back to back, the
  // two could reach L4 as one group commit, which the gate on version 2
  // would hold whole, and wait(1, kL4) would never return.
  checkpoints(store, 1, 1);
  store.wait(1, kL4);
  checkpoints(store, 2, 2);
  store.wait(2, kL2);
  store.discard(1);
  // The measured interval, not synchronisation: the discard runs on the
  // eviction thread while version 2 waits at L4's gate.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard lock(mutex);
    open = true;
  }
  opened.notify_all();
  store.wait(2, kL4);
  store.close();
  EXPECT_TRUE(fs::exists(dir.path() + "/l4/s/v0000000001.r000000.rsg")) << "the discard broke version 2's chain at L4";
  // Only L4's copies left: the restart must find the chain whole there.
  EXPECT_EQ(remove_version(dir.path() + "/l2/s", 2), std::vector<int>{2});
  EXPECT_EQ(remove_version(dir.path() + "/l2/s", 1), std::vector<int>{1});
  Store restarted("s", config({{"capture.mode", "delta"}, {"persistent.every", "1"}}));
  fill(0);
  restarted.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(restarted.restart(), 2) << "version 2's chain was broken at L4";
  EXPECT_TRUE(holds_state_of(2));
}

TEST_F(AdjointStagingTest, AVersionLargerThanTheMemoryLevelIsReadFromItsLevel) {
  Store store("s", config(disk_with_prefetch("2MiB")));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 1);
  store.wait();
  store.prefetch({1});
  fill(0);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(holds_state_of(1));
  EXPECT_EQ(store.last_restart().level, kL2);
}

TEST_F(AdjointStagingTest, AFullMemoryRouteFailsTheVersionNamingTheCapacity) {
  auto keys = memory_only();
  keys["memory.capacity"] = "8MiB";  // one version of 5 MiB (three pieces), not two
  Store store("s", config(keys));
  // Over kStraightToMemoryBytes: through the staging buffer, so that the
  // level's worker fails the version and the next call reports it.
  std::vector<double> large((5u << 20) / sizeof(double), 1.0);
  store.protect(0, large.data(), large.size() * sizeof(double), "large");
  store.checkpoint(1);
  store.checkpoint(2);
  try {
    store.wait(2, kL1);
    FAIL() << "version 2 fitted in a memory level that holds version 1";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("memory.capacity"), std::string::npos) << error.what();
  }
  store.discard(1);
  large.assign(large.size(), 3.0);
  store.checkpoint(3);  // room again
  store.wait(3, kL1);
  large.assign(large.size(), 0.0);
  EXPECT_EQ(store.restart(3), 3);
  EXPECT_EQ(large.back(), 3.0);
}

// A version of at most kStraightToMemoryBytes bound for the memory level is
// written into it by checkpoint() itself (no staging buffer, no worker): it
// is there when checkpoint returns, and a full level fails that checkpoint,
// not a later call.
TEST_F(AdjointStagingTest, ASmallVersionIsInMemoryWhenCheckpointReturns) {
  auto keys = memory_only();
  keys["memory.capacity"] = "2MiB";  // one version of 1 MiB and its records, not two
  Store store("s", config(keys));
  std::vector<double> small(kMiB / sizeof(double), 1.0);  // under kStraightToMemoryBytes
  store.protect(0, small.data(), small.size() * sizeof(double), "small");
  store.checkpoint(1);
  ASSERT_EQ(store.stats().size(), 1u);
  EXPECT_EQ(store.stats()[0].capture, "copy");
  try {
    store.checkpoint(2);
    FAIL() << "version 2 fitted in a memory level that holds version 1";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("memory.capacity"), std::string::npos) << error.what();
  }
  store.discard(1);
  small.assign(small.size(), 3.0);
  store.checkpoint(3);
  small.assign(small.size(), 0.0);
  EXPECT_EQ(store.restart(3), 3);
  EXPECT_EQ(small.front(), 3.0);
}

// So does one of kStraightToMemoryBytes, in several chunks (each in one run
// of the level's memory), with pipeline threads that it does not wake.
TEST_F(AdjointStagingTest, AVersionOfSeveralChunksIsInMemoryWhenCheckpointReturns) {
  auto keys = memory_only();
  keys["memory.capacity"] = "6MiB";  // one version of 4 MiB, not two
  keys["pipeline.threads"] = "2";
  Store store("s", config(keys));
  std::vector<std::uint64_t> large(kStraightToMemoryBytes / sizeof(std::uint64_t));
  const auto pattern = [&](std::uint64_t seed) {
    std::vector<std::uint64_t> values(large.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = i * 0x9E3779B97F4A7C15u + seed;
    return values;
  };
  store.protect(0, large.data(), large.size() * sizeof(std::uint64_t), "large");
  const auto fill_large = [&](std::uint64_t seed) {
    const std::vector<std::uint64_t> values = pattern(seed);
    std::copy(values.begin(), values.end(), large.begin());  // in the protected memory
  };
  fill_large(1);
  store.checkpoint(1);
  fill_large(2);
  try {
    store.checkpoint(2);
    FAIL() << "version 2 fitted in a memory level that holds version 1";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("memory.capacity"), std::string::npos) << error.what();
  }
  large.assign(large.size(), 0);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(large == pattern(1));
  EXPECT_EQ(store.stats().front().capture, "copy");
}

// docs/adjoint.md's sizing rule: a checkpoint over 2 MiB written into the
// memory level may take 2 MiB more than its bytes (each chunk needs one
// free run of a piece), and that much more per version is enough: two
// versions of 3 MiB fit in 10 MiB.
TEST_F(AdjointStagingTest, TwoMiBMorePerVersionHoldsVersionsOverTwoMiB) {
  auto keys = memory_only();
  keys["memory.capacity"] = std::to_string(2 * (kValues * sizeof(double) + 2 * kMiB));
  Store store("s", config(keys));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  checkpoints(store, 1, 2);  // each fails the checkpoint when it does not fit
  for (int version = 1; version <= 2; ++version) {
    fill(0);
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(holds_state_of(version));
  }
}

TEST_F(AdjointStagingTest, AForkCaptureCannotFeedTheMemoryLevel) {
  auto keys = memory_only();
  keys["capture.mode"] = "fork";
  EXPECT_THROW(Store("s", config(keys)), ConfigError);
}

TEST_F(AdjointStagingTest, CApiPrefetchesAndDiscards) {
  setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
  setenv("RESURGO_PERSISTENT_EVERY", "0", 1);
  setenv("RESURGO_MEMORY_CAPACITY", "64MiB", 1);
  setenv("RESURGO_LOG_LEVEL", "off", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_protect(store, 0, u.data(), u.size() * sizeof(double), "u"), RSG_OK);
  fill(1);
  ASSERT_EQ(rsg_checkpoint(store, 1), RSG_OK);
  const int order[] = {1};
  EXPECT_EQ(rsg_prefetch(store, order, 1), RSG_OK);
  EXPECT_EQ(rsg_prefetch(store, nullptr, 1), RSG_EINVAL);
  int restored = -1;
  fill(0);
  EXPECT_EQ(rsg_restart(store, 1, &restored), RSG_OK);
  EXPECT_TRUE(holds_state_of(1));
  EXPECT_EQ(rsg_discard(store, 1), RSG_OK);
  EXPECT_EQ(rsg_discard(store, 1), RSG_ESTATE);
  EXPECT_EQ(rsg_discard(store, 9), RSG_ENOTFOUND);
  EXPECT_EQ(rsg_restart(store, 1, &restored), RSG_ENOTFOUND);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  for (const char* name : {"RESURGO_LOCAL_PATH", "RESURGO_PERSISTENT_EVERY", "RESURGO_MEMORY_CAPACITY",
                           "RESURGO_LOG_LEVEL"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace resurgo
