// The first checkpoints after open (issue 27, part 5): the staging buffer's
// pages are touched piece by piece, those ahead of the next block to be
// allocated first; a capture faults in the untouched pieces of its block
// itself, just before it copies into each, and reports that time; the
// background touch waits while a capture or a restart runs.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "capture/copy_capture.h"
#include "capture/host_buffer.h"
#include "test_util.h"

namespace resurgo {
namespace {

constexpr std::uint64_t kPiece = HostBuffer::kPiece;

TEST(FirstCheckpointsTest, ThePiecesAheadOfTheNextBlockAreTouchedFirst) {
  HostBuffer buffer(6 * kPiece);
  std::byte* block = buffer.allocate(2 * kPiece + 100);  // pieces 0..2; the next block begins in piece 2
  EXPECT_EQ(buffer.prefault_next(), 2 * kPiece);
  EXPECT_EQ(buffer.prefault_next(), 3 * kPiece);
  EXPECT_FALSE(buffer.touched(0)) << "behind the next block: touched last";
  buffer.release(block);  // empty: the next block begins at 0 again
  EXPECT_EQ(buffer.prefault_next(), 0u);
  EXPECT_EQ(buffer.prefault_next(), kPiece);
  EXPECT_EQ(buffer.prefault_next(), 4 * kPiece);
  EXPECT_EQ(buffer.prefault_next(), 5 * kPiece);
  EXPECT_EQ(buffer.prefault_next(), std::nullopt) << "every piece is touched";
  for (std::uint64_t offset = 0; offset < 6 * kPiece; offset += kPiece) EXPECT_TRUE(buffer.touched(offset));
}

TEST(FirstCheckpointsTest, TheTouchGoesAroundTheRingFromTheNextBlock) {
  HostBuffer buffer(4 * kPiece);
  std::byte* first = buffer.allocate(3 * kPiece);
  std::byte* second = buffer.allocate(kPiece / 2);  // piece 3: the next block begins there
  EXPECT_EQ(buffer.prefault_next(), 3 * kPiece);
  EXPECT_EQ(buffer.prefault_next(), 0u) << "the ring wraps: its start comes next";
  buffer.release(first);
  buffer.release(second);
}

TEST(FirstCheckpointsTest, EachPieceIsTouchedOnceWhoeverComesFirst) {
  HostBuffer buffer(4 * kPiece);
  std::byte* block = buffer.allocate(2 * kPiece);
  EXPECT_GT(buffer.touch(block + 10), 0.0) << "an untouched piece is faulted in, and timed";
  EXPECT_TRUE(buffer.touched(0));
  EXPECT_EQ(buffer.touch(block), 0.0) << "touched already";
  EXPECT_EQ(buffer.prefault_next(), 2 * kPiece) << "the background skips the pieces a capture touched";
  EXPECT_EQ(buffer.touch(block + 2 * kPiece), 0.0) << "touched by the background";
  EXPECT_GT(buffer.touch(block + kPiece), 0.0);
  buffer.release(block);
}

TEST(FirstCheckpointsTest, TheBackgroundTouchWaitsWhileACaptureOrARestartHoldsIt) {
  HostBuffer buffer(3 * kPiece);
  buffer.pause_prefault(HostBuffer::Pause::kRestart, true);
  buffer.pause_prefault(HostBuffer::Pause::kCapture, true);
  buffer.start_prefault();
  buffer.pause_prefault(HostBuffer::Pause::kRestart, false);  // the capture still holds it
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(buffer.touched(0));
  buffer.pause_prefault(HostBuffer::Pause::kCapture, false);
  EXPECT_TRUE(eventually([&] { return buffer.touched(0) && buffer.touched(kPiece) && buffer.touched(2 * kPiece); }));
}

// The floor of a small state's buffer is many versions: touched whole at
// open, it would cost every store its CPU time and memory up front.
TEST(FirstCheckpointsTest, TheBackgroundTouchStaysAFewVersionsAheadOfTheRing) {
  HostBuffer buffer(8 * kPiece);
  buffer.start_prefault(kPiece + 1);  // the next block's piece and the one after
  EXPECT_TRUE(eventually([&] { return buffer.touched(0) && buffer.touched(kPiece); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(buffer.touched(2 * kPiece)) << "beyond the pieces ahead";

  buffer.pause_prefault(HostBuffer::Pause::kCapture, true);
  std::byte* block = buffer.allocate(2 * kPiece);  // the next block begins in piece 2
  buffer.pause_prefault(HostBuffer::Pause::kCapture, false);
  EXPECT_TRUE(eventually([&] { return buffer.touched(2 * kPiece) && buffer.touched(3 * kPiece); }))
      << "the end of a capture moves the touch on";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(buffer.touched(4 * kPiece));
  buffer.release(block);
}

// Woken at the end of a capture, the background touch must not take the
// capturing thread's core before checkpoint() returns (a normal thread woken
// on a busy core does): the saves of small versions paid its touch of the
// ring's first lap that way.
TEST(FirstCheckpointsTest, TheBackgroundTouchDoesNotPreemptTheThreadThatWakesIt) {
  HostBuffer buffer(8 * kPiece);
  buffer.start_prefault(kPiece);
  std::optional<int> policy;
  EXPECT_TRUE(eventually([&] { return (policy = policy_of_thread("rsg prefault")).has_value(); }, std::chrono::seconds(5)))
      << "the background touch's thread is named \"rsg prefault\"";
  EXPECT_EQ(policy, SCHED_BATCH);
}

class CopyCaptureTouchTest : public ::testing::Test {
 protected:
  CopyCaptureTouchTest() { config_.buffer.capacity = 8 * kPiece; }

  // Bytes that differ from piece to piece and from one extent to the next.
  static std::vector<std::byte> pattern(std::uint64_t bytes, int seed) {
    std::vector<std::byte> data(bytes);
    for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + i / 4093 + seed) & 0xff);
    return data;
  }

  static std::vector<Extent> extents_of(const std::vector<std::vector<std::byte>>& regions) {
    std::vector<Extent> extents;
    for (std::size_t r = 0; r < regions.size(); ++r) {
      extents.push_back({static_cast<std::uint32_t>(r), 0, regions[r].size(), regions[r].data()});
    }
    return extents;
  }

  static void expect_copied(const Snapshot& snapshot, const std::vector<std::vector<std::byte>>& regions) {
    ASSERT_EQ(snapshot.extents.size(), regions.size());
    for (std::size_t r = 0; r < regions.size(); ++r) {
      EXPECT_NE(snapshot.extents[r].source, regions[r].data()) << "region " << r << " points into the buffer";
      EXPECT_EQ(std::memcmp(snapshot.extents[r].source, regions[r].data(), regions[r].size()), 0) << "region " << r;
    }
  }

  // Whether every page of [at, at + bytes) is resident: faulted in.
  static bool resident(const std::byte* at, std::uint64_t bytes) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> pages((bytes + page - 1) / page);
    if (::mincore(const_cast<std::byte*>(at), bytes, pages.data()) != 0) return false;
    return std::all_of(pages.begin(), pages.end(), [](unsigned char p) { return (p & 1) != 0; });
  }

  Config config_;
  ThreadPool pool_{2};
  Logger log_{"touch", LogLevel::kWarn};
  int capturing_ = 0;
  CopyCapture capture_{CaptureContext{config_, pool_, log_, [this](bool on) { capturing_ += on ? 1 : -1; }}};
};

// Extents that cross the buffer's pieces at odd offsets, in a block that
// begins in the middle of a piece: every byte lands where it belongs.
TEST_F(CopyCaptureTouchTest, APieceByPieceCopyKeepsEveryByteAndReportsItsTimes) {
  const std::vector<std::vector<std::byte>> regions{pattern(kPiece + 12345, 1), pattern(7, 2),
                                                    pattern(2 * kPiece + 3, 3)};
  const std::uint64_t total = regions[0].size() + regions[1].size() + regions[2].size();
  capture_.resize(total);
  CaptureTimes first_times;
  const auto started = std::chrono::steady_clock::now();
  Snapshot first = capture_.capture(extents_of(regions), format::Header{}, first_times);
  const double blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  expect_copied(first, regions);
  EXPECT_EQ(capturing_, 0) << "the pipeline's evictions are deferred during the copy only";
  EXPECT_GE(first_times.first_touch_seconds, 0.0);
  EXPECT_GT(first_times.copy_seconds, 0.0);
  EXPECT_LE(first_times.backpressure_seconds + first_times.first_touch_seconds + first_times.copy_seconds, blocked);

  CaptureTimes second_times;  // right after the first block: begins in the middle of a piece
  Snapshot second = capture_.capture(extents_of(regions), format::Header{}, second_times);
  expect_copied(second, regions);
  expect_copied(first, regions);
  first.release();
  second.release();

  CaptureTimes again;  // the ring is empty: back at offset 0, into pieces the first capture touched
  Snapshot third = capture_.capture(extents_of(regions), format::Header{}, again);
  expect_copied(third, regions);
  EXPECT_EQ(third.extents[0].source, first.extents[0].source);
  EXPECT_EQ(again.first_touch_seconds, 0.0) << "every piece of this block was touched by the first capture";
  third.release();
}

// A small version's ring goes round a buffer of many of them, its versions
// closer together than the background touch may wait for a core: the piece
// after the one the next block begins in is touched before a capture gets
// there, and nothing beyond it.
TEST_F(CopyCaptureTouchTest, SmallVersionsKeepTheNextPieceTouchedAheadOfTheRing) {
  const std::vector<std::vector<std::byte>> regions{pattern(256 << 10, 1)};
  CaptureTimes times;
  Snapshot first = capture_.capture(extents_of(regions), format::Header{}, times);  // the ring's first block
  const std::byte* base = first.extents[0].source;
  EXPECT_TRUE(eventually([&] { return resident(base + kPiece, kPiece); }))
      << "the next block begins in piece 0; piece 1 is touched ahead of it";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(resident(base + 2 * kPiece, kPiece)) << "beyond the next piece: the buffer is not touched whole";
  first.release();
}

}  // namespace
}  // namespace resurgo
