// The L0 device cache's side of the prefetch (DeviceCache::stage and
// discard; docs/adjoint.md, "Backward pass on the device"), through host
// memory: a stage never waits for a flush, a staged version is not evicted
// until consumed, and a discard frees only what no flush waits for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "gpu/device_cache.h"
#include "gpu/host_memory.h"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

using Status = CaptureResult::Status;

class DevicePrefetchCacheTest : public ::testing::Test {
 protected:
  // Room for `versions` versions of kVersion bytes, fully mapped.
  DeviceCache& open(std::size_t versions) {
    DeviceCacheOptions options;
    options.capacity = versions * kVersion;
    options.chunk = options.capacity;
    cache_ = std::make_unique<DeviceCache>(std::make_unique<HostMemory>(), options, log_);
    cache_->wait_growth_done();
    return *cache_;
  }
  std::vector<CaptureSpan> spans() { return {{bytes_.data(), bytes_.size()}}; }

  const std::size_t kVersion = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<std::byte> bytes_ = random_bytes(kVersion, 5);
  Logger log_{"test", LogLevel::kOff};
  std::unique_ptr<DeviceCache> cache_;
};

TEST_F(DevicePrefetchCacheTest, AStageFindsNoRoomInsteadOfWaitingForAFlush) {
  DeviceCache& cache = open(2);
  ASSERT_EQ(cache.capture(1, spans()).status, Status::kCached);
  ASSERT_EQ(cache.stage(2, spans()).status, Status::kCached);
  EXPECT_EQ(cache.stage(3, spans()).status, Status::kNoRoom);  // 1 not flushed: a capture would wait here
  cache.flushed(1);
  EXPECT_EQ(cache.stage(3, spans()).status, Status::kCached);  // 1 evicted
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.stats().evicted, 1u);
}

TEST_F(DevicePrefetchCacheTest, AStagedVersionStaysUntilConsumed) {
  DeviceCache& cache = open(2);
  ASSERT_EQ(cache.stage(1, spans()).status, Status::kCached);
  ASSERT_EQ(cache.stage(2, spans()).status, Status::kCached);
  EXPECT_EQ(cache.stage(3, spans()).status, Status::kNoRoom);
  EXPECT_TRUE(cache.contains(1));
  cache.flushed(1);  // consumed
  EXPECT_EQ(cache.stage(3, spans()).status, Status::kCached);
  EXPECT_FALSE(cache.contains(1));
  std::vector<std::byte> back(kVersion);
  cache.read(3, 0, back.data(), back.size());
  EXPECT_EQ(back, bytes_);
}

TEST_F(DevicePrefetchCacheTest, ADiscardFreesAStagedOrFlushedVersionButNotOneAwaitingItsFlush) {
  DeviceCache& cache = open(3);
  ASSERT_EQ(cache.capture(1, spans()).status, Status::kCached);
  ASSERT_EQ(cache.stage(2, spans()).status, Status::kCached);
  EXPECT_FALSE(cache.discard(1));  // its writer still reads it
  EXPECT_TRUE(cache.contains(1));
  EXPECT_TRUE(cache.discard(2));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_EQ(cache.stats().used, kVersion);
  cache.flushed(1);
  EXPECT_TRUE(cache.discard(1));
  EXPECT_EQ(cache.stats().used, 0u);
  EXPECT_FALSE(cache.discard(1));  // gone
  EXPECT_FALSE(cache.discard(7));  // never there
}

// A restart that found a flushed version in L0 holds it until it read it:
// the prefetch thread, making room meanwhile, finds none instead of
// evicting it (the race a Python adjoint test met on a slow machine).
TEST_F(DevicePrefetchCacheTest, AHeldVersionIsNotEvictedToMakeRoomForAStage) {
  DeviceCache& cache = open(1);
  ASSERT_EQ(cache.capture(1, spans()).status, Status::kCached);
  cache.flushed(1);
  ASSERT_TRUE(cache.hold(1));
  EXPECT_FALSE(cache.hold(2));  // not cached: nothing held
  EXPECT_EQ(cache.stage(2, spans()).status, Status::kNoRoom);
  std::vector<std::byte> back(kVersion);
  cache.read(1, 0, back.data(), back.size());
  EXPECT_EQ(back, bytes_);
  cache.unhold(1);
  EXPECT_EQ(cache.stage(2, spans()).status, Status::kCached);
  EXPECT_FALSE(cache.contains(1));
}

// A version discarded while held stays in the queue, its space unfreed,
// until the hold ends.
TEST_F(DevicePrefetchCacheTest, ADiscardedVersionStillHeldIsEvictedOnlyOnceLetGo) {
  DeviceCache& cache = open(1);
  ASSERT_EQ(cache.stage(1, spans()).status, Status::kCached);
  ASSERT_TRUE(cache.hold(1));
  EXPECT_TRUE(cache.discard(1));
  EXPECT_EQ(cache.stage(2, spans()).status, Status::kNoRoom);
  cache.unhold(1);
  EXPECT_EQ(cache.stage(2, spans()).status, Status::kCached);
}

// A capture into an L0 full of staged versions not restored yet takes the
// oldest one's room instead of waiting for a restart that comes only after
// the capture (a schedule that recomputes and saves during the reverse
// pass); that version's restart then reads the next levels. A held one
// stays: the capture waits for its read.
TEST_F(DevicePrefetchCacheTest, ACaptureTakesTheRoomOfAStagedVersionNotRestoredYet) {
  DeviceCache& cache = open(2);
  ASSERT_EQ(cache.stage(1, spans()).status, Status::kCached);
  ASSERT_EQ(cache.stage(2, spans()).status, Status::kCached);
  EXPECT_EQ(cache.capture(3, spans()).status, Status::kCached);
  EXPECT_FALSE(cache.contains(1));
  EXPECT_FALSE(cache.hold(1));  // its restart reads the next levels
  EXPECT_TRUE(cache.contains(2));
  EXPECT_EQ(cache.stats().evicted, 1u);
  EXPECT_EQ(cache.stage(4, spans()).status, Status::kNoRoom);  // stages still never evict each other
  std::vector<std::byte> back(kVersion);
  cache.read(3, 0, back.data(), back.size());
  EXPECT_EQ(back, bytes_);
}

TEST_F(DevicePrefetchCacheTest, AStageTooLargeIsNoBypass) {
  DeviceCache& cache = open(1);
  const std::vector<std::byte> large(2 * kVersion);
  EXPECT_EQ(cache.stage(1, {{large.data(), large.size()}}).status, Status::kTooLarge);
  EXPECT_EQ(cache.stats().bypassed, 0u);
}

}  // namespace
}  // namespace resurgo::gpu
