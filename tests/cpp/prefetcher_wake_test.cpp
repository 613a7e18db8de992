// The prefetch thread wakes only for what it waits for: every commit and
// every eviction from memory pokes it, and in an adjoint run whose versions
// are all fetched a wake-up per checkpoint would be a context switch for
// nothing (issue 27).
#include <gtest/gtest.h>

#include <sched.h>

#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/trace.h"
#include "pipeline/prefetcher.h"
#include "test_util.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

class PrefetcherWakeTest : public ::testing::Test {
 protected:
  // After the pass that set_order starts, the passes stay at `expected`
  // while nothing pokes.
  void expect_passes_settle_at(std::uint64_t expected) {
    ASSERT_TRUE(eventually([&] { return prefetcher.passes() >= expected; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(prefetcher.passes(), expected);
  }

  MemoryLevel memory{"wake", 0, 4u << 20, 0};
  Logger log{"wake", LogLevel::kError};
  Trace trace{""};
  Prefetcher prefetcher{memory, [] { return std::vector<Level*>{}; }, log, trace};
};

TEST_F(PrefetcherWakeTest, APokeWithNothingLeftForItWakesNothing) {
  prefetcher.set_order({});
  expect_passes_settle_at(1);
  for (int poke = 0; poke < 100; ++poke) prefetcher.poke();
  expect_passes_settle_at(1);
}

TEST_F(PrefetcherWakeTest, APokeAfterAPassThatLeftAnUnwrittenVersionLooksAgain) {
  prefetcher.set_order({3});  // no level holds version 3: a commit will poke
  expect_passes_settle_at(1);
  prefetcher.poke();
  expect_passes_settle_at(2);
}

TEST_F(PrefetcherWakeTest, ANewOrderLooksAgainWithoutAPoke) {
  prefetcher.set_order({});
  expect_passes_settle_at(1);
  prefetcher.set_order({});
  expect_passes_settle_at(2);
}

// Woken by a discard, a commit or a restore on the application's thread, it
// must not take that thread's core before the call returns.
TEST_F(PrefetcherWakeTest, TheThreadDoesNotPreemptTheThreadThatWakesIt) {
  prefetcher.set_order({});
  std::optional<int> policy;
  ASSERT_TRUE(eventually([&] { return (policy = policy_of_thread("rsg prefetch")).has_value(); }));
  EXPECT_EQ(policy, SCHED_BATCH);
}

}  // namespace
}  // namespace resurgo
