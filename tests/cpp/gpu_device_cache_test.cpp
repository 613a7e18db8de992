// The L0 device cache's state machine through host memory: mapping in chunks,
// captures waiting only for the chunk they need, FIFO eviction only after a
// flush and only when fully mapped and full, oversize versions, running out
// of memory while mapping, and bytes round-tripping.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <map>
#include <thread>
#include <utility>

#include "gpu/device_cache.h"
#include "gpu_test_util.h"
#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

using Status = CaptureResult::Status;

class DeviceCacheTest : public ::testing::Test {
 protected:
  // `chunks` chunks of kChunk bytes, mapped as the script allows.
  DeviceCache& open(std::size_t chunks, std::size_t capacity = 0) {
    DeviceCacheOptions options;
    options.capacity = capacity ? capacity : chunks * chunk_;
    options.chunk = chunk_;
    options.on_wait = [this](const char* reason) {
      waits_.emplace_back(reason);
      if (on_wait_) on_wait_(reason);
    };
    cache_ = std::make_unique<DeviceCache>(std::make_unique<ScriptedMemory>(script_), options, log_);
    return *cache_;
  }
  // Lets every chunk through first, so the cache's destructor does not wait
  // for a mapping held back forever.
  void TearDown() override {
    script_->allow(std::numeric_limits<std::size_t>::max());
    cache_.reset();
  }

  CaptureResult capture(DeviceCache& cache, std::int64_t version, std::size_t bytes) {
    data_[version] = random_bytes(bytes, static_cast<unsigned>(version));
    return cache.capture(version, {{data_[version].data(), bytes}});
  }
  void expect_round_trip(DeviceCache& cache, std::int64_t version) {
    const std::vector<std::byte>& want = data_.at(version);
    std::vector<std::byte> got(want.size());
    cache.read(version, 0, got.data(), got.size());
    EXPECT_EQ(got, want) << "version " << version;
  }

  const std::size_t chunk_ = 16 * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::shared_ptr<MemoryScript> script_ = std::make_shared<MemoryScript>();
  Logger log_{"gpu-test", LogLevel::kOff};
  std::vector<std::string> waits_;
  std::function<void(const char*)> on_wait_;
  std::map<std::int64_t, std::vector<std::byte>> data_;
  std::unique_ptr<DeviceCache> cache_;
};

TEST_F(DeviceCacheTest, MapsTheWholeCapacityInAscendingChunks) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  DeviceCache& cache = open(0, 3 * chunk_ + 5 * page - 100);  // rounded up to 3 chunks + 5 pages
  cache.wait_growth_done();
  const DeviceCacheStats stats = cache.stats();
  EXPECT_EQ(stats.capacity, 3 * chunk_ + 5 * page);
  EXPECT_EQ(stats.mapped, stats.capacity);
  EXPECT_TRUE(stats.growth_done);
  EXPECT_TRUE(stats.growth_stopped.empty());
  const std::vector<std::pair<std::size_t, std::size_t>> want = {
      {0, chunk_}, {chunk_, chunk_}, {2 * chunk_, chunk_}, {3 * chunk_, 5 * page}};
  EXPECT_EQ(script_->mapped, want);
}

TEST_F(DeviceCacheTest, BytesRoundTripFromSeveralSpans) {
  DeviceCache& cache = open(2);
  const auto first = random_bytes(1000, 1);
  const auto second = random_bytes(chunk_ / 2, 2);
  ASSERT_EQ(cache.capture(7, {{first.data(), first.size()}, {second.data(), second.size()}}).status, Status::kCached);
  EXPECT_TRUE(cache.contains(7));
  std::vector<std::byte> got(first.size() + second.size());
  cache.read(7, 0, got.data(), got.size());
  EXPECT_EQ(0, std::memcmp(got.data(), first.data(), first.size()));
  EXPECT_EQ(0, std::memcmp(got.data() + first.size(), second.data(), second.size()));
  std::vector<std::byte> part(10);
  cache.read(7, first.size() + 5, part.data(), part.size());
  EXPECT_EQ(0, std::memcmp(part.data(), second.data() + 5, part.size()));
}

TEST_F(DeviceCacheTest, CaptureWaitsOnlyForTheChunkItNeeds) {
  script_->allow(1);
  DeviceCache& cache = open(4);
  script_->wait_blocked_at(1);  // chunk 0 is mapped, chunk 1 held back
  CaptureResult within = capture(cache, 1, chunk_ / 2);
  EXPECT_EQ(within.status, Status::kCached);
  EXPECT_EQ(within.map_wait_seconds, 0.0);
  EXPECT_TRUE(waits_.empty());

  on_wait_ = [this](const char*) { script_->allow(2); };
  CaptureResult across = capture(cache, 2, chunk_);  // [chunk/2, 3 chunk/2): needs chunk 1
  EXPECT_EQ(across.status, Status::kCached);
  EXPECT_GT(across.map_wait_seconds, 0.0);
  EXPECT_EQ(waits_, std::vector<std::string>{"mapping"});
  EXPECT_EQ(cache.stats().map_wait_seconds, across.map_wait_seconds);
  expect_round_trip(cache, 1);
  expect_round_trip(cache, 2);
}

TEST_F(DeviceCacheTest, NothingIsEvictedBeforeTheCacheIsFullyMapped) {
  script_->allow(2);
  DeviceCache& cache = open(4);
  script_->wait_blocked_at(2);
  ASSERT_EQ(capture(cache, 1, chunk_).status, Status::kCached);
  ASSERT_EQ(capture(cache, 2, chunk_).status, Status::kCached);
  cache.flushed(1);
  cache.flushed(2);
  bool kept_while_mapping = false;
  on_wait_ = [&](const char*) {
    kept_while_mapping = cache.contains(1) && cache.contains(2);
    script_->allow(4);
  };
  ASSERT_EQ(capture(cache, 3, chunk_).status, Status::kCached);
  EXPECT_TRUE(kept_while_mapping);
  ASSERT_EQ(capture(cache, 4, chunk_).status, Status::kCached);
  EXPECT_EQ(cache.stats().evicted, 0u);  // full now, but nothing was needed yet
  for (int v = 1; v <= 4; ++v) EXPECT_TRUE(cache.contains(v)) << v;

  ASSERT_EQ(capture(cache, 5, chunk_).status, Status::kCached);
  EXPECT_FALSE(cache.contains(1));  // the oldest, and only as much as needed
  for (int v = 2; v <= 5; ++v) EXPECT_TRUE(cache.contains(v)) << v;
  EXPECT_EQ(cache.stats().evicted, 1u);
  for (int v = 2; v <= 5; ++v) expect_round_trip(cache, v);
}

TEST_F(DeviceCacheTest, AFullCacheWaitsForTheOldestToBeFlushed) {
  DeviceCache& cache = open(2);
  cache.wait_growth_done();
  ASSERT_EQ(capture(cache, 1, chunk_).status, Status::kCached);
  ASSERT_EQ(capture(cache, 2, chunk_).status, Status::kCached);
  cache.flushed(2);  // the newer one: evicting it would break FIFO order
  bool oldest_kept = false;
  on_wait_ = [&](const char*) {
    oldest_kept = cache.contains(1) && cache.contains(2);
    cache.flushed(1);
  };
  const CaptureResult result = capture(cache, 3, chunk_);
  EXPECT_EQ(result.status, Status::kCached);
  EXPECT_EQ(waits_, std::vector<std::string>{"flush"});
  EXPECT_TRUE(oldest_kept);
  EXPECT_FALSE(cache.contains(1));
  EXPECT_TRUE(cache.contains(2));
  expect_round_trip(cache, 3);
}

TEST_F(DeviceCacheTest, EvictsInFifoOrderAndWrapsAround) {
  DeviceCache& cache = open(4);
  cache.wait_growth_done();
  ASSERT_EQ(capture(cache, 1, chunk_).status, Status::kCached);
  ASSERT_EQ(capture(cache, 2, 2 * chunk_).status, Status::kCached);
  ASSERT_EQ(capture(cache, 3, chunk_).status, Status::kCached);
  for (int v = 1; v <= 3; ++v) cache.flushed(v);
  // 2 chunks at the start of the range: versions 1 and 2 go, 3 stays.
  ASSERT_EQ(capture(cache, 4, 2 * chunk_).status, Status::kCached);
  EXPECT_FALSE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  cache.flushed(4);
  ASSERT_EQ(capture(cache, 5, chunk_).status, Status::kCached);  // between 4 and 3: nothing goes
  EXPECT_EQ(cache.stats().evicted, 2u);
  ASSERT_EQ(capture(cache, 6, chunk_).status, Status::kCached);  // 3 goes
  EXPECT_FALSE(cache.contains(3));
  EXPECT_TRUE(waits_.empty());
  for (int v : {4, 5, 6}) expect_round_trip(cache, v);
  EXPECT_EQ(cache.stats().used, 4 * chunk_);
}

TEST_F(DeviceCacheTest, AVersionLargerThanTheCacheBypassesIt) {
  DeviceCache& cache = open(2);
  const CaptureResult result = capture(cache, 1, 2 * chunk_ + 1);
  EXPECT_EQ(result.status, Status::kTooLarge);
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(cache.stats().bypassed, 1u);
  EXPECT_EQ(capture(cache, 2, 2 * chunk_).status, Status::kCached);  // exactly the capacity fits
}

TEST_F(DeviceCacheTest, OutOfMemoryWhileMappingStopsGrowingAndKeepsWorking) {
  script_->out_of_memory_at = 2;
  DeviceCache& cache = open(4);
  cache.wait_growth_done();
  const DeviceCacheStats stats = cache.stats();
  EXPECT_EQ(stats.mapped, 2 * chunk_);
  EXPECT_EQ(stats.growth_stopped, "out of memory");
  EXPECT_EQ(script_->map_calls, 3u);  // no chunk tried after the failure

  EXPECT_EQ(capture(cache, 1, 3 * chunk_).status, Status::kTooLarge);  // fits the reservation, not the memory
  ASSERT_EQ(capture(cache, 2, chunk_).status, Status::kCached);
  ASSERT_EQ(capture(cache, 3, chunk_).status, Status::kCached);
  cache.flushed(2);
  ASSERT_EQ(capture(cache, 4, chunk_).status, Status::kCached);  // evicts 2 within the mapped part
  EXPECT_FALSE(cache.contains(2));
  expect_round_trip(cache, 3);
  expect_round_trip(cache, 4);
}

TEST_F(DeviceCacheTest, NoMemoryAtAllBypassesEveryVersion) {
  script_->out_of_memory_at = 0;
  DeviceCache& cache = open(2);
  cache.wait_growth_done();
  EXPECT_EQ(cache.stats().mapped, 0u);
  EXPECT_EQ(capture(cache, 1, 100).status, Status::kTooLarge);
}

TEST_F(DeviceCacheTest, CloseWakesACaptureWaitingForAFlush) {
  DeviceCache& cache = open(1);
  cache.wait_growth_done();
  ASSERT_EQ(capture(cache, 1, chunk_).status, Status::kCached);
  on_wait_ = [&](const char*) { cache.close(); };
  EXPECT_EQ(capture(cache, 2, chunk_).status, Status::kClosed);
  EXPECT_TRUE(cache.contains(1));
}

TEST_F(DeviceCacheTest, AVersionBeingReadIsNotEvicted) {
  DeviceCache& cache = open(1);
  cache.wait_growth_done();
  ASSERT_EQ(capture(cache, 1, chunk_).status, Status::kCached);
  cache.flushed(1);
  std::promise<void> capture_waits;
  on_wait_ = [&](const char* reason) {
    EXPECT_STREQ(reason, "read");
    capture_waits.set_value();
  };
  std::thread capturer;
  bool started = false;
  script_->during_copy_out = [&] {
    if (std::exchange(started, true)) return;  // the read of version 2 below
    capturer = std::thread([&] { EXPECT_EQ(capture(cache, 2, chunk_).status, Status::kCached); });
    capture_waits.get_future().wait();  // the capture found version 1 pinned by this read
  };
  expect_round_trip(cache, 1);
  capturer.join();
  EXPECT_FALSE(cache.contains(1));
  expect_round_trip(cache, 2);
}

TEST_F(DeviceCacheTest, AFailedCopyLeavesNoVersion) {
  DeviceCache& cache = open(2);
  script_->fail_copies_in = true;
  EXPECT_THROW(capture(cache, 1, 100), GpuError);
  EXPECT_FALSE(cache.contains(1));
  script_->fail_copies_in = false;
  ASSERT_EQ(capture(cache, 1, 2 * chunk_).status, Status::kCached);  // the space was given back
  expect_round_trip(cache, 1);
}

TEST_F(DeviceCacheTest, MisuseIsReportedByName) {
  DeviceCache& cache = open(1);
  ASSERT_EQ(capture(cache, 1, 100).status, Status::kCached);
  EXPECT_THROW(capture(cache, 1, 100), InvalidArgumentError);
  EXPECT_THROW(cache.flushed(2), NotFoundError);
  std::vector<std::byte> buffer(512);
  EXPECT_THROW(cache.read(2, 0, buffer.data(), 1), NotFoundError);
  EXPECT_THROW(cache.read(1, 200, buffer.data(), 100), InvalidArgumentError);
  DeviceCacheOptions zero;
  zero.capacity = 0;
  EXPECT_THROW(DeviceCache(std::make_unique<HostMemory>(), zero, log_), InvalidArgumentError);
}

}  // namespace
}  // namespace resurgo::gpu
