// track.method = "hash": exactly the blocks whose bytes changed, whole blocks
// of block_pages pages, clipped to the region's own bytes and pages.
#include "track_test_util.h"
#include "track/hash_tracker.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <initializer_list>
#include <system_error>
#include <thread>
#include <vector>

namespace resurgo::track {
namespace {

class HashTrackerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Tracker> tracker_ = make_hash_tracker();
};

TEST_F(HashTrackerTest, FirstCollectReportsEveryPageThenOnlyTheWrittenOnes) {
  PageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  EXPECT_EQ(tracker_->method(), Method::kHash);
  EXPECT_EQ(tracker_->collect(1, 1), every_page(8));
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(8));  // no write in between
  *memory.page(1) = std::byte{1};
  memory.page(5)[page_size() - 1] = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {1, 5}));
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(8));
}

TEST_F(HashTrackerTest, BlocksOfFourPagesAreReportedWhole) {
  PageMapping memory(16);
  tracker_->watch(1, memory.page(0), 16 * page_size());
  tracker_->collect(1, 4);
  *memory.page(5) = std::byte{1};
  *memory.page(15) = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(16, {4, 5, 6, 7, 12, 13, 14, 15}));
}

TEST_F(HashTrackerTest, ANewBlockSizeAppliesFromTheNextInterval) {
  PageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  tracker_->collect(1, 1);
  *memory.page(6) = std::byte{1};
  // This interval had blocks of one page; the next one has blocks of four.
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(8, {6}));
  EXPECT_EQ(tracker_->collect(1, 4), PageSet(8));
  *memory.page(2) = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {0, 1, 2, 3}));
  *memory.page(2) = std::byte{2};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {2}));
}

TEST_F(HashTrackerTest, AWriteThatRestoresTheBytesIsNotReported) {
  PageMapping memory(4);
  tracker_->watch(1, memory.page(0), 4 * page_size());
  tracker_->collect(1, 1);
  *memory.page(2) = std::byte{7};
  *memory.page(2) = std::byte{0};
  *memory.page(3) = std::byte{0};  // the value it already had
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(4));
}

TEST_F(HashTrackerTest, ARegionOfOneByteHashesOnlyThatByte) {
  PageMapping memory(1);
  std::byte* byte = memory.page(0) + 100;
  tracker_->watch(1, byte, 1);
  EXPECT_EQ(tracker_->collect(1, 4), every_page(1));
  byte[-1] = std::byte{1};  // same page, outside the region
  byte[1] = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 4), PageSet(1));
  *byte = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(1, {0}));
}

TEST_F(HashTrackerTest, TheLastBlockIsClippedToTheRegionsPages) {
  PageMapping memory(12);
  tracker_->watch(1, memory.page(0), 10 * page_size());  // blocks 0-3, 4-7, 8-9
  tracker_->collect(1, 4);
  *memory.page(9) = std::byte{1};
  *memory.page(10) = std::byte{1};  // outside the region
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(10, {8, 9}));
}

TEST_F(HashTrackerTest, ARegionOffPageBoundariesCountsThePagesItTouches) {
  PageMapping memory(5);
  std::byte* base = memory.page(0) + 100;
  tracker_->watch(1, base, 3 * page_size());  // touches pages 0 to 3
  EXPECT_EQ(tracker_->collect(1, 1), every_page(4));
  base[-1] = std::byte{1};                  // before the region, on its page 0
  base[3 * page_size()] = std::byte{1};     // after it, on its page 3
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(4));
  base[0] = std::byte{1};
  base[3 * page_size() - 1] = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {0, 3}));
}

TEST_F(HashTrackerTest, TwoRegionsAreTrackedApart) {
  PageMapping first(4);
  PageMapping second(6);
  tracker_->watch(1, first.page(0), 4 * page_size());
  tracker_->watch(2, second.page(0), 6 * page_size());
  tracker_->collect(1, 1);
  tracker_->collect(2, 2);
  *first.page(3) = std::byte{1};
  *second.page(0) = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {3}));
  EXPECT_EQ(tracker_->collect(2, 2), pages_of(6, {0, 1}));
}

TEST_F(HashTrackerTest, WritesFromAnotherThreadAreReported) {
  PageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  tracker_->collect(1, 1);
  std::thread writer([&] {
    *memory.page(3) = std::byte{1};
    *memory.page(7) = std::byte{1};
  });
  writer.join();
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {3, 7}));
}

TEST_F(HashTrackerTest, UnwatchLeavesTheMemoryAsItWasAndForgetsTheRegion) {
  PageMapping memory(2);
  std::memset(memory.page(0), 0x5a, 2 * page_size());
  tracker_->watch(1, memory.page(0), 2 * page_size());
  tracker_->collect(1, 1);
  tracker_->unwatch(1);
  tracker_->unwatch(42);  // unknown: ignored
  const std::vector<std::byte> expected(2 * page_size(), std::byte{0x5a});
  EXPECT_EQ(std::memcmp(memory.page(0), expected.data(), expected.size()), 0);
  *memory.page(1) = std::byte{1};  // still writable
  EXPECT_THROW(tracker_->collect(1, 1), InvalidArgumentError);
  tracker_->watch(1, memory.page(0), 2 * page_size());
  EXPECT_EQ(tracker_->collect(1, 1), every_page(2));
}

TEST_F(HashTrackerTest, RejectsBadArguments) {
  PageMapping memory(1);
  tracker_->watch(1, memory.page(0), page_size());
  EXPECT_THROW(tracker_->watch(1, memory.page(0), page_size()), InvalidArgumentError);
  EXPECT_THROW(tracker_->watch(2, memory.page(0), 0), InvalidArgumentError);
  EXPECT_THROW(tracker_->collect(1, 0), InvalidArgumentError);
  EXPECT_THROW(tracker_->collect(1, 3), InvalidArgumentError);
  EXPECT_EQ(tracker_->collect(1, 1), every_page(1));  // the bad calls changed nothing
}

}  // namespace
}  // namespace resurgo::track
