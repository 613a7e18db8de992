// The Scheduler with a bounded level: versions taken back to back, while
// the eviction thread waits for the captures to end, must not fill the
// level with versions its keep no longer holds, and a version must not fail
// because the eviction thread freed the level while its commit failed.
#include "pipeline/scheduler.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/units.h"
#include "core/catalog.h"
#include "base/log.h"
#include "base/trace.h"
#include "base/thread_pool.h"
#include "forwarding_level.h"
#include "full_version.h"
#include "resurgo/config.hpp"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

// A memory level whose commit, when the level is full, lets the eviction
// thread win the race: it evicts what its keep allows before it reports the
// level full, so the writer that then evicts finds nothing left to remove.
class EvictedWhileItsCommitFails final : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;

  void commit(int version, const std::function<void(WritableFile&)>& write) override {
    try {
      level_.commit(version, write);
    } catch (const LevelFullError&) {
      level_.evict([](int) { return false; });
      throw;
    }
  }
};

enum class EvictionThread { kBehind, kWinsTheRace };

// A scheduler routing every version to one memory level of `versions`
// pieces (one version each) that keeps `keep` versions.
struct OneMemoryLevel {
  OneMemoryLevel(int versions, int keep, EvictionThread eviction = EvictionThread::kBehind)
      : memory("scheduler", 0, versions * 2 * kMiB, keep),
        level(eviction == EvictionThread::kWinsTheRace ? static_cast<Level&>(racing) : memory) {}
  void take(int version) {
    catalog.add(version, Clock::now(), {1}, VersionStats{});
    scheduler.submit(version, {&level}, testing::full_version("scheduler", version, state));
    catalog.wait_settled(version, 1);
  }

  MemoryLevel memory;
  EvictedWhileItsCommitFails racing{memory};
  Level& level;
  Config config;
  ThreadPool pool{1};
  Catalog catalog{"scheduler"};
  const Logger log{"scheduler", LogLevel::kOff};
  Trace trace{""};
  const std::vector<std::byte> state = std::vector<std::byte>(kMiB + kMiB / 2, std::byte{7});
  Scheduler scheduler{{{&level, 1}}, config.pipeline, pool, catalog, log, trace};  // last: stopped first
};

TEST(SchedulerTest, ABoundedLevelFullOfVersionsBeyondKeepEvictsThemBeforeFailing) {
  OneMemoryLevel route(4, 2);
  MemoryLevel& memory = route.memory;
  Scheduler& scheduler = route.scheduler;

  // A capture that never ends: the eviction thread cannot run meanwhile.
  scheduler.set_capturing(true);
  for (int version = 1; version <= 10; ++version) {
    route.take(version);
    EXPECT_EQ(route.catalog.outcome(version, 1), 1) << "version " << version << " did not reach the memory level";
  }
  EXPECT_LE(memory.versions().size(), 4u);
  EXPECT_TRUE(memory.holds(10));
  scheduler.set_capturing(false);
  scheduler.drain();
  EXPECT_EQ(memory.versions(), (std::vector<int>{9, 10}));
}

TEST(SchedulerTest, ABoundedLevelFullOfVersionsItMustKeepFailsTheVersion) {
  OneMemoryLevel route(2, 0);  // keep all: nothing may be evicted
  for (int version = 1; version <= 3; ++version) route.take(version);
  EXPECT_EQ(route.catalog.outcome(2, 1), 1);
  EXPECT_EQ(route.catalog.outcome(3, 1), -1);
  EXPECT_EQ(route.memory.versions(), (std::vector<int>{1, 2}));
}

TEST(SchedulerTest, AVersionWhoseLevelWasFreedWhileItsCommitFailedIsWrittenStill) {
  OneMemoryLevel route(4, 2, EvictionThread::kWinsTheRace);
  route.scheduler.set_capturing(true);  // only the level's own eviction frees it
  for (int version = 1; version <= 10; ++version) {
    route.take(version);
    EXPECT_EQ(route.catalog.outcome(version, 1), 1) << "version " << version << " did not reach the memory level";
  }
  EXPECT_TRUE(route.memory.holds(10));
  route.scheduler.set_capturing(false);
}

}  // namespace
}  // namespace resurgo
