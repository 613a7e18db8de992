// What a discard costs the eviction thread (issue 27): an adjoint run
// discards a version at nearly every save, and a discarded version must stay
// on a level only while a delta there builds on it. A store that wrote no
// delta has no such version newer than one it wrote: the discard removes it
// without listing the level's versions (a directory listing on L2).
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "base/units.h"
#include "core/catalog.h"
#include "forwarding_level.h"
#include "full_version.h"
#include "pipeline/scheduler.h"
#include "resurgo/config.hpp"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

class ListingCounter final : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;
  std::vector<int> versions() override {
    ++listings;
    return level_.versions();
  }
  std::atomic<int> listings{0};
};

struct FullVersions {
  void take(int version) {
    catalog.add(version, Clock::now(), {1}, VersionStats{});
    scheduler.submit(version, {&level}, testing::full_version("discard", version, state));
    catalog.wait_settled(version, 1);
  }
  void discard(int version) {
    catalog.discard(version);
    scheduler.discard(version);
    scheduler.drain();
  }

  MemoryLevel memory{"discard", 0, 64 * kMiB, 0};
  ListingCounter level{memory};
  Config config;
  ThreadPool pool{1};
  Catalog catalog{"discard"};
  const Logger log{"discard", LogLevel::kOff};
  Trace trace{""};
  const std::vector<std::byte> state = std::vector<std::byte>(64 << 10, std::byte{7});
  Scheduler scheduler{{{&level, 1}}, config.pipeline, pool, catalog, log, trace};  // last: stopped first
};

TEST(SchedulerDiscardTest, ADiscardOfAFullVersionInAStoreWithoutDeltasListsNoLevel) {
  FullVersions route;
  for (int version = 1; version <= 5; ++version) route.take(version);
  route.level.listings = 0;
  route.discard(3);
  route.discard(1);
  EXPECT_EQ(route.memory.versions(), (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(route.level.listings, 0);
}

}  // namespace
}  // namespace resurgo
