// L1 host buffer: FIFO ring allocation, reuse, wrap-around without overlap,
// release in any order, and backpressure on a full buffer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <thread>

#include "resurgo/errors.hpp"
#include "base/units.h"
#include "capture/capture.h"
#include "capture/host_buffer.h"

namespace resurgo {
namespace {

// True if `done` stays false for a short while. Used only to check that a
// thread is (still) blocked; the ordering itself comes from release().
bool stays_false(const std::atomic<bool>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  while (std::chrono::steady_clock::now() < until) {
    if (done.load()) return false;
    std::this_thread::yield();
  }
  return !done.load();
}

// allocate() on another thread; `done` turns true once it returned.
struct BlockedAllocation {
  BlockedAllocation(HostBuffer& buffer, std::uint64_t bytes)
      : result(std::async(std::launch::async, [this, &buffer, bytes] {
          std::byte* block = buffer.allocate(bytes);
          done = true;
          return block;
        })) {}
  std::atomic<bool> done{false};
  std::future<std::byte*> result;
};

bool overlap(const std::byte* a, std::uint64_t a_bytes, const std::byte* b, std::uint64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

TEST(HostBufferTest, FifoAllocationAndReuse) {
  HostBuffer buffer(1000);
  EXPECT_EQ(buffer.capacity(), 1000u);
  EXPECT_TRUE(buffer.empty());
  std::byte* a = buffer.allocate(300);
  std::byte* b = buffer.allocate(300);
  std::byte* c = buffer.allocate(400);  // fills the buffer exactly
  EXPECT_FALSE(buffer.empty());
  EXPECT_EQ(b, a + 300);
  EXPECT_EQ(c, a + 600);
  std::memset(a, 1, 300);
  std::memset(b, 2, 300);
  std::memset(c, 3, 400);
  EXPECT_EQ(std::to_integer<int>(a[299]), 1);
  EXPECT_EQ(std::to_integer<int>(b[0]), 2);
  buffer.release(a);
  buffer.release(b);
  buffer.release(c);
  EXPECT_TRUE(buffer.empty());
  std::byte* whole = buffer.allocate(1000);  // an empty buffer starts over at its beginning
  EXPECT_EQ(whole, a);
  buffer.release(whole);
  EXPECT_TRUE(buffer.empty());
}

TEST(HostBufferTest, BlockLargerThanCapacityIsInvalid) {
  HostBuffer buffer(4096);
  EXPECT_THROW(buffer.allocate(4097), InvalidArgumentError);
  EXPECT_TRUE(buffer.empty());
  std::byte* block = buffer.allocate(4096);
  ASSERT_NE(block, nullptr);
  buffer.release(block);
}

TEST(HostBufferTest, WrapAroundNeverOverlapsLiveBlocks) {
  constexpr std::uint64_t kCapacity = 16384;
  constexpr std::uint64_t kMaxBlock = 1500;
  HostBuffer buffer(kCapacity);
  struct Live {
    std::byte* block;
    std::uint64_t bytes;
    std::byte fill;
  };
  std::deque<Live> live;
  std::uint64_t live_bytes = 0;
  const std::byte* base = nullptr;
  const std::byte* previous = nullptr;
  int wraps = 0;
  std::uint64_t sizes_state = 12345;
  for (int i = 0; i < 2000; ++i) {
    sizes_state = sizes_state * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t bytes = 1 + (sizes_state >> 33) % kMaxBlock;
    // Release the oldest blocks until the allocation cannot block in any
    // FIFO ring: unwrapped, the free space is split in two runs, one of
    // which holds at least half of it; wrapped, one run holds all free space
    // except the unused end left by the wrap (less than one block).
    while (2 * bytes > kCapacity - live_bytes || bytes + kMaxBlock > kCapacity - live_bytes) {
      ASSERT_FALSE(live.empty());
      buffer.release(live.front().block);
      live_bytes -= live.front().bytes;
      live.pop_front();
    }
    if (live.empty()) {
      EXPECT_TRUE(buffer.empty());
    }
    // On another thread, so that a wrong block here fails instead of hanging.
    auto pending = std::async(std::launch::async, [&buffer, bytes] { return buffer.allocate(bytes); });
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      for (const Live& l : live) buffer.release(l.block);
      FAIL() << "allocate(" << bytes << ") blocked with " << live_bytes << " of " << kCapacity << " bytes live";
    }
    std::byte* block = pending.get();
    if (base == nullptr) base = block;  // the first block starts the ring
    ASSERT_GE(block, base);
    ASSERT_LE(block + bytes, base + kCapacity);
    if (previous != nullptr && block < previous) ++wraps;
    previous = block;
    for (const Live& other : live) ASSERT_FALSE(overlap(block, bytes, other.block, other.bytes)) << "block " << i;
    const auto fill = static_cast<std::byte>(i % 251 + 1);
    std::memset(block, std::to_integer<int>(fill), bytes);
    live.push_back({block, bytes, fill});
    live_bytes += bytes;
    // Every live block still holds its own pattern.
    for (const Live& l : live) {
      for (std::uint64_t k = 0; k < l.bytes; ++k) ASSERT_EQ(l.block[k], l.fill) << "block " << i;
    }
  }
  EXPECT_GT(wraps, 10);
  for (const Live& l : live) buffer.release(l.block);
  EXPECT_TRUE(buffer.empty());
}

TEST(HostBufferTest, FullBufferBlocksUntilTheOldestBlockIsReleased) {
  HostBuffer buffer(1000);
  std::byte* a = buffer.allocate(600);
  std::byte* b = buffer.allocate(300);
  BlockedAllocation waiter(buffer, 600);
  EXPECT_TRUE(stays_false(waiter.done)) << "allocate(600) should wait: only 100 bytes are free";
  buffer.release(a);  // frees [0, 600)
  std::byte* c = waiter.result.get();
  EXPECT_TRUE(waiter.done);
  EXPECT_EQ(c, a);
  EXPECT_FALSE(overlap(c, 600, b, 300));
  buffer.release(b);
  buffer.release(c);
  EXPECT_TRUE(buffer.empty());
}

TEST(HostBufferTest, SpaceIsReclaimedInFifoOrder) {
  HostBuffer buffer(1000);
  std::byte* a = buffer.allocate(300);
  std::byte* b = buffer.allocate(300);
  std::byte* c = buffer.allocate(300);
  BlockedAllocation waiter(buffer, 200);
  buffer.release(b);  // released out of order: its space stays behind a
  EXPECT_TRUE(stays_false(waiter.done)) << "b's space is not reusable while the older a is live";
  EXPECT_FALSE(buffer.empty());
  buffer.release(a);  // now a and b are reclaimed together
  std::byte* d = waiter.result.get();
  EXPECT_FALSE(overlap(d, 200, c, 300));
  EXPECT_GE(d, a);
  EXPECT_LE(d + 200, a + 1000);
  buffer.release(c);
  buffer.release(d);
  EXPECT_TRUE(buffer.empty());
}

TEST(HostBufferTest, SeveralWaitersAreServedAsSpaceFrees) {
  HostBuffer buffer(1000);
  std::byte* a = buffer.allocate(500);
  std::byte* b = buffer.allocate(500);
  BlockedAllocation first(buffer, 500);
  BlockedAllocation second(buffer, 500);
  EXPECT_TRUE(stays_false(first.done));
  EXPECT_TRUE(stays_false(second.done));
  buffer.release(a);
  buffer.release(b);
  std::byte* x = first.result.get();
  std::byte* y = second.result.get();
  EXPECT_FALSE(overlap(x, 500, y, 500));
  buffer.release(x);
  buffer.release(y);
  EXPECT_TRUE(buffer.empty());
}

// A zero-byte block (a checkpoint of no bytes with an explicit
// buffer.capacity) placed when the ring is wrapped and exactly full must not
// make the ring forget that it is full.
// A zero-byte block would sit at the tail of a full wrapped ring and hide
// the wrap, so the next block would overlap a live one: it is refused.
TEST(HostBufferTest, HasRoomTellsWhetherAnAllocationWouldWait) {
  HostBuffer buffer(4096);
  EXPECT_TRUE(buffer.has_room(4096));
  std::byte* first = buffer.allocate(3072);
  EXPECT_TRUE(buffer.has_room(1024));
  EXPECT_FALSE(buffer.has_room(2048));
  buffer.release(first);
  EXPECT_TRUE(buffer.has_room(4096));
}

TEST(HostBufferTest, TheDefaultCapacityIsTwiceTheStateAndAtLeastTheSmallStateFloor) {
  const std::uint64_t quarter = quarter_of_physical_memory();
  ASSERT_GT(quarter, kSmallStateBuffer) << "a machine with less than 256 MiB of memory";
  EXPECT_EQ(default_buffer_capacity(4096), kSmallStateBuffer);
  EXPECT_EQ(default_buffer_capacity(kSmallStateBuffer / 2), kSmallStateBuffer);
  EXPECT_EQ(default_buffer_capacity(kSmallStateBuffer), std::min(2 * kSmallStateBuffer, quarter));
  EXPECT_EQ(default_buffer_capacity(quarter), quarter);
}

TEST(HostBufferTest, ZeroByteBlockIsRefused) {
  HostBuffer buffer(100);
  std::byte* a = buffer.allocate(60);
  std::byte* b = buffer.allocate(40);
  buffer.release(a);
  std::byte* c = buffer.allocate(60);  // wraps: the ring is full
  EXPECT_THROW(buffer.allocate(0), InvalidArgumentError);
  buffer.release(b);
  buffer.release(c);
  EXPECT_TRUE(buffer.empty());
}

}  // namespace
}  // namespace resurgo
