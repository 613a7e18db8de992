// track.method = "soft-dirty". The coordination of several trackers runs on
// a fake kernel (the bits as a set of page numbers), so that it is checked
// where the kernel lacks CONFIG_MEM_SOFT_DIRTY; the same behaviour on the
// real bits runs where the kernel has them and is skipped, saying why, where
// it has not.
#include "track_test_util.h"
#include "track/soft_dirty_tracker.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <set>
#include <system_error>
#include <thread>
#include <vector>

namespace resurgo::track {
namespace {

// Small pages only: a transparent huge page has one soft-dirty bit for all
// its pages.
struct SmallPageMapping : PageMapping {
  explicit SmallPageMapping(std::size_t pages) : PageMapping(pages) { ::madvise(base(), bytes(), MADV_NOHUGEPAGE); }
};

// The process's soft-dirty bits as a set of page numbers, set by write().
class FakeKernel final : public SoftDirtyKernel {
 public:
  void write(std::byte* address) {
    *address = std::byte{1};
    dirty_.insert(number(address));
  }
  void clear_all() override {
    dirty_.clear();
    ++clears_;
  }
  void read(const std::byte* base, std::size_t bytes, PageSet& written) override {
    regions_read_.insert(base);
    for (std::size_t page = 0; page < pages_spanned(base, bytes); ++page) {
      if (dirty_.count(number(base) + page) != 0) written.insert(page);
    }
  }

  int clears() const { return clears_; }
  // The regions (by base) read since the previous call.
  std::set<const std::byte*> take_regions_read() { return std::exchange(regions_read_, {}); }

 private:
  static std::uintptr_t number(const std::byte* address) {
    return reinterpret_cast<std::uintptr_t>(address) / page_size();
  }

  std::set<std::uintptr_t> dirty_;
  std::set<const std::byte*> regions_read_;
  int clears_ = 0;
};

class SoftDirtyTrackerTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeKernel> kernel_ = std::make_shared<FakeKernel>();
  std::shared_ptr<SoftDirtyCoordinator> coordinator_ = make_soft_dirty_coordinator(kernel_);
  std::unique_ptr<Tracker> tracker_ = make_soft_dirty_tracker(coordinator_);
};

TEST_F(SoftDirtyTrackerTest, FirstCollectReportsEveryPageThenOnlyTheWrittenOnes) {
  SmallPageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  EXPECT_EQ(tracker_->method(), Method::kSoftDirty);
  kernel_->write(memory.page(2));  // before the first collect: counted in "every page"
  EXPECT_EQ(tracker_->collect(1, 1), every_page(8));
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(8));
  kernel_->write(memory.page(1));
  kernel_->write(memory.page(5));
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {1, 5}));
  EXPECT_EQ(kernel_->clears(), 3);
}

TEST_F(SoftDirtyTrackerTest, ReportsPagesWhateverTheBlockSize) {
  SmallPageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  tracker_->collect(1, 4);
  kernel_->write(memory.page(6));
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(8, {6}));
}

TEST_F(SoftDirtyTrackerTest, TwoTrackersKeepTheBitsEachOthersClearsErase) {
  auto other = make_soft_dirty_tracker(coordinator_);
  SmallPageMapping mine(4);
  SmallPageMapping theirs(4);
  tracker_->watch(1, mine.page(0), 4 * page_size());
  other->watch(1, theirs.page(0), 4 * page_size());  // same id, another tracker
  tracker_->collect(1, 1);
  other->collect(1, 1);
  kernel_->write(mine.page(2));
  kernel_->write(theirs.page(3));
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {2}));  // clears theirs too
  kernel_->write(theirs.page(0));
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(4));
  EXPECT_EQ(other->collect(1, 1), pages_of(4, {0, 3}));
  EXPECT_EQ(other->collect(1, 1), PageSet(4));
  EXPECT_EQ(tracker_->collect(1, 1), PageSet(4));
}

TEST_F(SoftDirtyTrackerTest, TwoRegionsOfOneTrackerKeepEachOthersBits) {
  SmallPageMapping first(4);
  SmallPageMapping second(6);
  tracker_->watch(1, first.page(0), 4 * page_size());
  tracker_->watch(2, second.page(0), 6 * page_size());
  tracker_->collect(1, 1);
  tracker_->collect(2, 1);
  kernel_->write(first.page(3));
  kernel_->write(second.page(0));
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {3}));
  EXPECT_EQ(tracker_->collect(2, 1), pages_of(6, {0}));
}

TEST_F(SoftDirtyTrackerTest, ARegionWatchedLaterStartsWithEveryPage) {
  SmallPageMapping memory(4);
  tracker_->watch(1, memory.page(0), page_size());
  tracker_->collect(1, 1);
  tracker_->watch(2, memory.page(1), 3 * page_size());  // its first collect is "every page"
  kernel_->write(memory.page(2));
  tracker_->collect(1, 1);  // the harvest keeps region 2's bit, then clears
  EXPECT_EQ(tracker_->collect(2, 1), every_page(3));
  EXPECT_EQ(tracker_->collect(2, 1), PageSet(3));
}

TEST_F(SoftDirtyTrackerTest, ForgottenRegionsAreNoLongerRead) {
  auto other = make_soft_dirty_tracker(coordinator_);
  SmallPageMapping memory(3);
  tracker_->watch(1, memory.page(0), page_size());
  tracker_->watch(2, memory.page(1), page_size());
  other->watch(1, memory.page(2), page_size());
  tracker_->collect(1, 1);
  EXPECT_EQ(kernel_->take_regions_read(),
            (std::set<const std::byte*>{memory.page(0), memory.page(1), memory.page(2)}));
  tracker_->unwatch(2);
  tracker_->unwatch(42);  // unknown: ignored
  other.reset();
  tracker_->collect(1, 1);
  EXPECT_EQ(kernel_->take_regions_read(), (std::set<const std::byte*>{memory.page(0)}));
  EXPECT_THROW(tracker_->collect(2, 1), InvalidArgumentError);
  tracker_->watch(2, memory.page(1), page_size());
  EXPECT_EQ(tracker_->collect(2, 1), every_page(1));
}

TEST_F(SoftDirtyTrackerTest, RejectsBadArgumentsWithoutClearing) {
  SmallPageMapping memory(1);
  tracker_->watch(1, memory.page(0), page_size());
  EXPECT_THROW(tracker_->watch(1, memory.page(0), page_size()), InvalidArgumentError);
  EXPECT_THROW(tracker_->watch(2, memory.page(0), 0), InvalidArgumentError);
  EXPECT_THROW(tracker_->collect(1, 0), InvalidArgumentError);
  EXPECT_THROW(tracker_->collect(1, 6), InvalidArgumentError);
  EXPECT_THROW(tracker_->collect(3, 1), InvalidArgumentError);
  EXPECT_EQ(kernel_->clears(), 0);
  EXPECT_EQ(tracker_->collect(1, 1), every_page(1));
}

// The real bits, from /proc/self; skipped where the kernel has none.
class SoftDirtyKernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      tracker_ = make_soft_dirty_tracker();
    } catch (const Unavailable& error) {
      GTEST_SKIP() << error.what();
    }
  }
  std::unique_ptr<Tracker> tracker_;
};

TEST(SoftDirtyAvailability, UnavailableSaysWhyAndWhatToUseInstead) {
  try {
    make_soft_dirty_tracker();
  } catch (const Unavailable& error) {
    EXPECT_STREQ(error.what(),
                 "soft-dirty: this kernel does not report soft-dirty bits (needs "
                 "CONFIG_MEM_SOFT_DIRTY, x86_64); set track.method = uffd or hash");
    return;
  }
  GTEST_SKIP() << "this kernel reports soft-dirty bits";
}

TEST_F(SoftDirtyKernelTest, ReportsExactlyTheWrittenPages) {
  SmallPageMapping memory(8);
  *memory.page(0) = std::byte{1};  // present before the clear; the others are not
  tracker_->watch(1, memory.page(0), 8 * page_size());
  EXPECT_EQ(tracker_->collect(1, 4), every_page(8));
  EXPECT_EQ(tracker_->collect(1, 4), PageSet(8));
  *memory.page(0) = std::byte{2};
  *memory.page(5) = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 4), pages_of(8, {0, 5}));
}

TEST_F(SoftDirtyKernelTest, ARegionOffPageBoundariesCountsThePagesItTouches) {
  SmallPageMapping memory(5);
  std::byte* base = memory.page(0) + 100;
  tracker_->watch(1, base, 3 * page_size());  // touches pages 0 to 3
  EXPECT_EQ(tracker_->collect(1, 1), every_page(4));
  base[3 * page_size() - 1] = std::byte{1};
  base[3 * page_size()] = std::byte{1};  // past the region, on its page 3
  memory.page(4)[0] = std::byte{1};      // past its last page
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {3}));
}

TEST_F(SoftDirtyKernelTest, TwoTrackersInOneProcessKeepEachOthersBits) {
  auto other = make_soft_dirty_tracker();
  SmallPageMapping mine(4);
  SmallPageMapping theirs(4);
  tracker_->watch(1, mine.page(0), 4 * page_size());
  other->watch(1, theirs.page(0), 4 * page_size());
  tracker_->collect(1, 1);
  other->collect(1, 1);
  *mine.page(2) = std::byte{1};
  *theirs.page(3) = std::byte{1};
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(4, {2}));
  EXPECT_EQ(other->collect(1, 1), pages_of(4, {3}));
  EXPECT_EQ(other->collect(1, 1), PageSet(4));
}

TEST_F(SoftDirtyKernelTest, WritesFromAnotherThreadAreReported) {
  SmallPageMapping memory(8);
  tracker_->watch(1, memory.page(0), 8 * page_size());
  tracker_->collect(1, 1);
  std::thread writer([&] {
    *memory.page(3) = std::byte{1};
    *memory.page(7) = std::byte{1};
  });
  writer.join();
  EXPECT_EQ(tracker_->collect(1, 1), pages_of(8, {3, 7}));
}

TEST_F(SoftDirtyKernelTest, UnwatchLeavesTheMemoryAsItWas) {
  SmallPageMapping memory(2);
  std::memset(memory.page(0), 0x5a, 2 * page_size());
  tracker_->watch(1, memory.page(0), 2 * page_size());
  tracker_->collect(1, 1);
  tracker_->unwatch(1);
  const std::vector<std::byte> expected(2 * page_size(), std::byte{0x5a});
  EXPECT_EQ(std::memcmp(memory.page(0), expected.data(), expected.size()), 0);
  *memory.page(1) = std::byte{1};  // still writable
  EXPECT_THROW(tracker_->collect(1, 1), InvalidArgumentError);
}

}  // namespace
}  // namespace resurgo::track
