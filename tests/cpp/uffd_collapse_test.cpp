// Huge pages split by uffd tracking, collapsed again (capture/auto_capture.h,
// capture/huge_page_collapse.h). The kernel facts the auto capture relies
// on: a first write to a write-protected huge page splits it; MADV_COLLAPSE
// is refused on memory still tracked, which stays tracked; once unwatched it
// collapses, and watched again every write is still reported. Then the auto
// capture: a copied region split while it was tracked is huge again while
// it rests, and once tracked again its writes are all seen and its version
// restores bit for bit.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "../sanitized.h"
#include "capture/auto_capture.h"
#include "capture/huge_page_collapse.h"
#include "capture/mappings.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "huge_aligned_memory.h"
#include "track/uffd_tracker.h"
#include "version_stats.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 uapi
#endif

namespace resurgo {
namespace {

constexpr std::size_t kBytes = std::size_t{8} << 20;

// Private memory aligned to the huge page size and advised MADV_HUGEPAGE,
// so that it is huge at first touch where THP allows it.
class HugeMemory : public testing::HugeAlignedMemory {
 public:
  explicit HugeMemory(std::size_t bytes) : HugeAlignedMemory(bytes) {
    ::madvise(data(), bytes, MADV_HUGEPAGE);  // EINVAL without THP: the tests skip
  }
  std::uint64_t huge_bytes() const { return anon_huge_page_bytes_at(data()); }
};

std::unique_ptr<track::Tracker> uffd_or_null() {
  try {
    return track::make_uffd_tracker();
  } catch (const track::Unavailable&) {
    return nullptr;
  }
}

// Why the test cannot run here, or "" when it can: uffd tracking, and
// memory huge at first touch.
std::string missing(HugeMemory& memory) {
  if (!uffd_or_null()) return "no uffd write protection (Linux >= 6.7 with UFFD_FEATURE_WP_ASYNC)";
  memory.fill(1);
  if (memory.huge_bytes() < memory.bytes()) {
    return "no transparent huge pages at first touch (" + std::to_string(memory.huge_bytes()) + " of " +
           std::to_string(memory.bytes()) + " bytes; THP disabled, or no free huge page)";
  }
  return "";
}

bool collapse_supported(HugeMemory& memory) {
  return ::madvise(memory.data(), memory.bytes(), MADV_COLLAPSE) == 0 || errno != EINVAL;
}

// Polls, since the pass runs on the collapser's thread.
bool becomes_huge(const HugeMemory& memory) {
  for (int i = 0; i < 500 && memory.huge_bytes() < memory.bytes(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return memory.huge_bytes() == memory.bytes();
}

TEST(UffdCollapse, TrackedMemoryIsRefusedAndStaysTrackedUnwatchedMemoryCollapses) {
  HugeMemory memory(kBytes);
  if (const std::string why = missing(memory); !why.empty()) GTEST_SKIP() << why;
  if (!collapse_supported(memory)) GTEST_SKIP() << "no MADV_COLLAPSE (Linux >= 6.1)";
  const auto tracker = track::make_uffd_tracker();
  tracker->watch(1, memory.data(), memory.bytes());
  tracker->collect(1, 1);
  memory.fill(2);
  EXPECT_EQ(memory.huge_bytes(), 0u) << "the first write to a write-protected huge page no longer splits it";
  EXPECT_EQ(tracker->collect(1, 1).count(), memory.bytes() / track::page_size());
  errno = 0;
  EXPECT_NE(::madvise(memory.data(), memory.bytes(), MADV_COLLAPSE), 0) << "collapsed write-protected memory";
  EXPECT_EQ(errno, EINVAL);
  memory.data()[5 * 4096] = std::byte{7};
  EXPECT_EQ(tracker->collect(1, 1).count(), 1u) << "the refused collapse dropped the write protection";
  tracker->unwatch(1);
  ASSERT_EQ(::madvise(memory.data(), memory.bytes(), MADV_COLLAPSE), 0) << std::strerror(errno);
  EXPECT_EQ(memory.huge_bytes(), memory.bytes());
  tracker->watch(1, memory.data(), memory.bytes());
  tracker->collect(1, 1);
  memory.data()[3 * 4096] = std::byte{8};
  memory.data()[memory.bytes() - 1] = std::byte{9};
  const track::PageSet written = tracker->collect(1, 1);
  EXPECT_EQ(written.count(), 2u) << "a write to a collapsed page went unseen";
  EXPECT_TRUE(written.contains(3));
  EXPECT_TRUE(written.contains(memory.bytes() / track::page_size() - 1));
  tracker->unwatch(1);
}

// `heavy` is tracked (and so split) for the interval before version 2,
// copied from then on and rests: huge again. Tracked again for the interval
// before `tracked_again`, all its writes count and the version restores.
TEST(UffdCollapse, AutoCollapsesTheRestingCopiedRegionAndStillSeesItsWritesAfterwards) {
  if (kSanitized) GTEST_SKIP() << "forks a writer, which the sanitizers' allocators do not survive";
  HugeMemory heavy(kBytes);
  HugeMemory light(kBytes);
  if (const std::string why = missing(heavy); !why.empty()) GTEST_SKIP() << why;
  if (!collapse_supported(heavy)) GTEST_SKIP() << "no MADV_COLLAPSE (Linux >= 6.1)";
  light.fill(2);
  TempDir dir;
  Store store("a", Config::load("", {{"local.path", dir.path() + "/l2"},
                                     {"persistent.every", "0"},
                                     {"capture.mode", "auto"}}));
  store.protect(0, heavy.data(), heavy.bytes(), "heavy");
  store.protect(1, light.data(), light.bytes(), "light");
  store.checkpoint(1);
  heavy.fill(3);
  ASSERT_LT(heavy.huge_bytes(), heavy.bytes()) << "tracked writes left the huge pages whole";
  store.checkpoint(2);
  ASSERT_EQ(stats_of(store, 2).capture, "copy+fork");
  EXPECT_TRUE(becomes_huge(heavy)) << heavy.huge_bytes() << " of " << heavy.bytes() << " bytes huge while it rests";
  const int tracked_again = 2 + kCopiedTrackedEvery;  // its first collect after the rest
  for (int version = 3; version < tracked_again; ++version) {
    heavy.fill(version + 1);
    store.checkpoint(version);
  }
  EXPECT_EQ(heavy.huge_bytes(), heavy.bytes()) << "untracked writes split the collapsed pages";
  heavy.fill(100);
  const std::vector<std::byte> heavy_saved = heavy.copy();
  const std::vector<std::byte> light_saved = light.copy();
  store.checkpoint(tracked_again);
  store.wait(kAllVersions, kL2);
  const VersionStats stats = stats_of(store, tracked_again);
  EXPECT_EQ(stats.capture, "copy+fork");
  EXPECT_EQ(stats.tracker, "uffd");
  EXPECT_GE(stats.dirty_bytes, heavy.bytes()) << "writes after the collapse went unseen";
  heavy.fill(101);
  light.fill(102);
  EXPECT_EQ(store.restart(tracked_again), tracked_again);
  EXPECT_TRUE(heavy.equals(heavy_saved));
  EXPECT_TRUE(light.equals(light_saved));
}

}  // namespace
}  // namespace resurgo
