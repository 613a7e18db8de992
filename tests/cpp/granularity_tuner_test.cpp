#include "track/granularity_tuner.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <random>
#include <vector>

#include "resurgo/errors.hpp"
#include "track/tracker.h"

namespace resurgo::track {
namespace {

using Sizes = std::vector<std::size_t>;
// The pages one interval writes, given the interval's number.
using Pattern = std::function<PageSet(int)>;

PageSet range(std::size_t region_pages, std::size_t first, std::size_t count) {
  PageSet set(region_pages);
  set.insert_range(first, count);
  return set;
}

// What mprotect and hash report: every block of `block_pages` holding a
// written page, clipped to the region.
PageSet whole_blocks(const PageSet& written, std::size_t block_pages) {
  PageSet blocks(written.pages());
  for (std::size_t page = 0; page < written.pages(); ++page) {
    if (written.contains(page)) blocks.insert_range(page / block_pages * block_pages, block_pages);
  }
  return blocks;
}

// Feeds `steps` intervals of `pattern` (as whole blocks without page
// resolution) and returns the block chosen after each.
Sizes next_blocks(GranularityTuner& tuner, const Pattern& pattern, int first_step, int steps,
                  bool page_resolution = true) {
  Sizes chosen;
  for (int step = first_step; step < first_step + steps; ++step) {
    const PageSet written = pattern(step);
    const PageSet reported = page_resolution ? written : whole_blocks(written, tuner.block_pages());
    chosen.push_back(tuner.observe(reported, page_resolution).next_block_pages);
  }
  return chosen;
}

// 32 pages of 4,096, 127 apart (never neighbours), moving with the step.
PageSet scattered_pages(int step) {
  PageSet set(4096);
  const auto shift = static_cast<std::size_t>(step) * 13;
  for (std::size_t i = 0; i < 32; ++i) set.insert((i * 127 + shift) % 4096);
  return set;
}

PageSet slab(int /*step*/) { return range(8192, 1024, 4096); }

TEST(GranularityTunerTest, ScatteredSinglePagesStayAtOnePage) {
  GranularityTuner tuner(0, 1024);
  for (int step = 0; step < 40; ++step) {
    const PageSet written = scattered_pages(step);
    ASSERT_EQ(written.count(), 32u);
    const GranularityTuner::Decision decision = tuner.observe(written, true);
    EXPECT_EQ(decision.blocks_to_save, written) << "step " << step;
    EXPECT_EQ(decision.block_pages_used, 1u);
    EXPECT_EQ(decision.next_block_pages, 1u);
  }
}

TEST(GranularityTunerTest, ContiguousSlabsDoubleOncePerIntervalUpToTheLargestBlock) {
  GranularityTuner tuner(0, 1024);
  EXPECT_EQ(tuner.block_pages(), 1u);
  EXPECT_EQ(next_blocks(tuner, slab, 0, 13),
            (Sizes{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024, 1024, 1024}));
  const GranularityTuner::Decision decision = tuner.observe(slab(13), true);
  EXPECT_EQ(decision.block_pages_used, 1024u);
  EXPECT_EQ(decision.blocks_to_save, slab(13));  // 1024-aligned: nothing more
}

TEST(GranularityTunerTest, SlabGrowsToTheBlockItFills) {
  // 96 pages from page 0: 32-page blocks hold it exactly, 64-page ones would
  // save 128 pages (fill 3/4).
  GranularityTuner aligned(0, 1024);
  EXPECT_EQ(next_blocks(aligned, [](int) { return range(1024, 0, 96); }, 0, 8),
            (Sizes{2, 4, 8, 16, 32, 32, 32, 32}));

  // 64 pages from page 3: 4-page blocks save pages 0..67 (fill 64/68 >= 15/16),
  // 8-page ones would save 0..71 (fill 8/9).
  GranularityTuner unaligned(0, 1024);
  EXPECT_EQ(next_blocks(unaligned, [](int) { return range(1024, 3, 64); }, 0, 6),
            (Sizes{2, 4, 4, 4, 4, 4}));
  EXPECT_EQ(unaligned.observe(range(1024, 3, 64), true).blocks_to_save, range(1024, 0, 68));
}

TEST(GranularityTunerTest, ShrinksBackWhenSlabsTurnToScatteredPages) {
  GranularityTuner tuner(0, 1024);
  next_blocks(tuner, slab, 0, 12);
  ASSERT_EQ(tuner.block_pages(), 1024u);
  const Pattern scattered = [](int step) {
    PageSet set(8192);
    for (std::size_t i = 0; i < 16; ++i) set.insert(i * 509 + static_cast<std::size_t>(step) % 7);
    return set;
  };
  EXPECT_EQ(next_blocks(tuner, scattered, 12, 10), (Sizes{512, 256, 128, 64, 32, 16, 8, 4, 2, 1}));
  std::size_t saved = 0;
  std::size_t written = 0;
  for (int step = 22; step < 72; ++step) {
    const GranularityTuner::Decision decision = tuner.observe(scattered(step), true);
    EXPECT_EQ(decision.next_block_pages, 1u);
    saved += decision.blocks_to_save.count();
    written += scattered(step).count();
  }
  EXPECT_EQ(saved, written);
  EXPECT_LE(static_cast<double>(saved), 1.15 * static_cast<double>(written));
}

TEST(GranularityTunerTest, ShrinksOnlyDownToTheNewPatternsBlock) {
  GranularityTuner tuner(0, 1024);
  next_blocks(tuner, slab, 0, 12);
  // Runs of 8 pages on 8-page boundaries, 520 pages apart.
  const Pattern runs_of_eight = [](int step) {
    PageSet set(8192);
    const auto shift = static_cast<std::size_t>(step % 3) * 8;
    for (std::size_t i = 0; i < 15; ++i) set.insert_range(i * 520 + shift, 8);
    return set;
  };
  EXPECT_EQ(next_blocks(tuner, runs_of_eight, 12, 9), (Sizes{512, 256, 128, 64, 32, 16, 8, 8, 8}));
  for (int step = 21; step < 71; ++step) {
    const GranularityTuner::Decision decision = tuner.observe(runs_of_eight(step), true);
    EXPECT_EQ(decision.blocks_to_save, runs_of_eight(step));
    EXPECT_EQ(decision.next_block_pages, 8u);
  }
}

TEST(GranularityTunerTest, AlternatingPatternSettlesWithoutOscillating) {
  // Slabs of 120 and 100 pages from page 0, in turn. Deciding on the last
  // interval alone would flip between 16 and 32 pages for ever: 120 pages
  // fill 32-page blocks 15/16 (grow), 100 fill them 25/32 (shrink). The
  // recent fill of 16-page blocks, 220/240, keeps it below 16.
  GranularityTuner tuner(0, 1024);
  const Pattern alternating = [](int step) { return range(1024, 0, step % 2 == 0 ? 120 : 100); };
  EXPECT_EQ(next_blocks(tuner, alternating, 0, 3), (Sizes{2, 4, 8}));
  EXPECT_EQ(next_blocks(tuner, alternating, 3, 50), Sizes(50, 8));
}

TEST(GranularityTunerTest, IntervalWithoutWritesChangesNothing) {
  GranularityTuner tuner(0, 1024);
  next_blocks(tuner, slab, 0, 3);
  ASSERT_EQ(tuner.block_pages(), 8u);
  const GranularityTuner::Decision decision = tuner.observe(PageSet(8192), true);
  EXPECT_EQ(decision.blocks_to_save, PageSet(8192));
  EXPECT_EQ(decision.block_pages_used, 8u);
  EXPECT_EQ(decision.next_block_pages, 8u);
  // The slab goes on growing one step per interval, as if nothing happened.
  EXPECT_EQ(next_blocks(tuner, slab, 3, 2), (Sizes{16, 32}));
}

TEST(GranularityTunerTest, FixedGranularityNeverChanges) {
  GranularityTuner tuner(4);
  EXPECT_EQ(tuner.block_pages(), 4u);
  EXPECT_EQ(next_blocks(tuner, slab, 0, 12), Sizes(12, 4));
  EXPECT_EQ(next_blocks(tuner, scattered_pages, 12, 12), Sizes(12, 4));
  const GranularityTuner::Decision decision = tuner.observe(scattered_pages(0), true);
  EXPECT_EQ(decision.block_pages_used, 4u);
  EXPECT_EQ(decision.blocks_to_save, whole_blocks(scattered_pages(0), 4));
  EXPECT_EQ(decision.blocks_to_save.count(), 32u * 4);
}

TEST(GranularityTunerTest, SavesWholeBlocksClippedAtTheRegionEnd) {
  // 21 pages in blocks of 8: the last block is pages 16..20.
  GranularityTuner tuner(8);
  PageSet written(21);
  written.insert(0);
  written.insert(20);
  PageSet expected(21);
  expected.insert_range(0, 8);
  expected.insert_range(16, 5);
  EXPECT_EQ(tuner.observe(written, true).blocks_to_save, expected);
}

TEST(GranularityTunerTest, WholeSmallRegionGrowsToOneBlockAndStops) {
  // A region of 100 pages written whole: fills are 1 at every level (blocks
  // clipped at the end); growth stops once one 128-page block holds it all.
  GranularityTuner tuner(0, 1024);
  EXPECT_EQ(next_blocks(tuner, [](int) { return range(100, 0, 100); }, 0, 9),
            (Sizes{2, 4, 8, 16, 32, 64, 128, 128, 128}));
  EXPECT_EQ(tuner.observe(range(100, 0, 100), true).blocks_to_save, range(100, 0, 100));
}

TEST(GranularityTunerTest, DefaultLargestBlockIsFourMebibytes) {
  const std::size_t largest = (std::size_t{4} << 20) / page_size();
  EXPECT_EQ(GranularityTuner::default_max_block_pages(), largest);
  GranularityTuner tuner;
  const Pattern whole = [&](int) { return range(4 * largest, 0, 4 * largest); };
  next_blocks(tuner, whole, 0, 40);
  EXPECT_EQ(tuner.block_pages(), largest);
}

TEST(GranularityTunerTest, RejectsBlocksThatAreNotPowersOfTwo) {
  EXPECT_THROW(GranularityTuner(3), InvalidArgumentError);
  EXPECT_THROW(GranularityTuner(0, 0), InvalidArgumentError);
  EXPECT_THROW(GranularityTuner(0, 48), InvalidArgumentError);
  EXPECT_NO_THROW(GranularityTuner(1, 1));
}

TEST(GranularityTunerTest, ProbesHalfTheBlockWithoutPageResolution) {
  // Eight slabs 512 pages apart, reported as whole blocks (mprotect, hash):
  // 64 pages each, then 16 from interval 30.
  const Pattern slabs = [](int step) {
    PageSet set(4096);
    for (std::size_t i = 0; i < 8; ++i) set.insert_range(i * 512, step < 30 ? 64 : 16);
    return set;
  };
  GranularityTuner tuner(0, 1024);
  // Grows to 64; every 8 intervals at 64 it tries 32, which the slabs take
  // back at once.
  EXPECT_EQ(next_blocks(tuner, slabs, 0, 30, false),
            (Sizes{2, 4, 8, 16, 32, 64, 64, 64, 64, 64, 64, 64, 64, 32, 64,
                   64, 64, 64, 64, 64, 64, 64, 32, 64, 64, 64, 64, 64, 64, 64}));
  // The probe at interval 31 is not taken back: it goes on halving until the
  // 16-page slabs double it again, then probes 8 every 8 intervals.
  EXPECT_EQ(next_blocks(tuner, slabs, 30, 22, false),
            (Sizes{64, 32, 16, 8, 16, 16, 16, 16, 16, 16, 16, 16, 8, 16,
                   16, 16, 16, 16, 16, 16, 16, 8}));
  const GranularityTuner::Decision decision = tuner.observe(whole_blocks(slabs(52), 8), false);
  EXPECT_EQ(decision.blocks_to_save, slabs(52));
  EXPECT_EQ(decision.next_block_pages, 16u);
}

// Himeno's 3-D array: 64 slices of 16 pages; each interval updates one
// contiguous range of slices.
PageSet himeno_slices(std::mt19937& random, std::size_t min_slices, std::size_t max_slices) {
  const std::size_t count = min_slices + random() % (max_slices - min_slices + 1);
  const std::size_t first = random() % (64 - count + 1);
  return range(64 * 16, first * 16, count * 16);
}

TEST(GranularityTunerTest, HimenoSlicesSettleOnOneSlice) {
  std::mt19937 random(8);
  GranularityTuner tuner(0, 1024);
  const Pattern short_ranges = [&](int) { return himeno_slices(random, 1, 8); };
  EXPECT_EQ(next_blocks(tuner, short_ranges, 0, 4), (Sizes{2, 4, 8, 16}));
  for (int step = 4; step < 300; ++step) {
    const PageSet written = himeno_slices(random, 1, 8);
    const GranularityTuner::Decision decision = tuner.observe(written, true);
    EXPECT_EQ(decision.blocks_to_save, written) << "step " << step;
    EXPECT_EQ(decision.next_block_pages, 16u) << "step " << step;
  }
}

TEST(GranularityTunerTest, HimenoSlicesSettleWithoutPageResolution) {
  std::mt19937 random(8);
  GranularityTuner tuner(0, 1024);
  const auto observe_blocks = [&](const PageSet& written) {
    return tuner.observe(whole_blocks(written, tuner.block_pages()), false);
  };
  for (int step = 0; step < 4; ++step) observe_blocks(himeno_slices(random, 1, 8));
  ASSERT_EQ(tuner.block_pages(), 16u);
  for (int step = 4; step < 300; ++step) {
    const PageSet written = himeno_slices(random, 1, 8);
    const GranularityTuner::Decision decision = observe_blocks(written);
    EXPECT_EQ(decision.blocks_to_save, written) << "step " << step;
    // At one slice, or probing half of one for one interval.
    EXPECT_EQ(decision.next_block_pages, (step - 4) % 9 == 7 ? 8u : 16u) << "step " << step;
  }
}

TEST(GranularityTunerTest, LongHimenoRangesSaveAtMostFifteenPercentMore) {
  // 16 to 48 slices: blocks of two or four slices pay off, at some waste.
  std::mt19937 random(3);
  GranularityTuner tuner(0, 1024);
  std::size_t saved = 0;
  std::size_t written = 0;
  for (int step = 0; step < 300; ++step) {
    const PageSet pages = himeno_slices(random, 16, 48);
    const GranularityTuner::Decision decision = tuner.observe(pages, true);
    if (step < 50) continue;
    EXPECT_GE(decision.block_pages_used, 16u);
    saved += decision.blocks_to_save.count();
    written += pages.count();
  }
  EXPECT_LE(static_cast<double>(saved), 1.15 * static_cast<double>(written));
}

}  // namespace
}  // namespace resurgo::track
