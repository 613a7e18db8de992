// GranularityTuner: the management block of one region (a power of two of
// pages), tuned from what each interval wrote, and the blocks a delta
// checkpoint saves (Appicpr, "Management Granularity Auto-Tuning").
//
// Growth is Appicpr's rule: a block is "marked" when it and the next block
// were both written, and the block doubles when the marked blocks are at least
// half the written ones. Appicpr never shrinks ("difficult to decide"). This
// tuner also watches the fill, written pages / pages of the blocks holding
// them (blocks are saved whole, so 1 / fill is the overhead in bytes):
//  - it halves after an interval that fills its blocks less than 7/8, so at
//    steady state a checkpoint saves at most 8/7 = 1.14x the written bytes;
//  - it doubles only when the doubled block would be filled at least 15/16,
//    in this interval and in the recent ones weighted by bytes. The gap
//    between the two thresholds is the hysteresis; the recent intervals keep
//    a pattern that moves from interval to interval from growing on a lucky
//    one and halving at the next.
//
// A tracker that reports whole blocks (mprotect, hash) hides the fill of the
// block in force; the tuner probes instead: after 8 intervals at one block it
// tries half of it. If the pattern still fills whole blocks, the doubling
// rule takes it back at the next interval; if not, the pattern shrank, and it
// goes on halving until a block is taken back.
//
// track.granularity = "doubling" selects Appicpr's rule alone instead: from
// one page, the block doubles after each interval whose marked blocks are at
// least half the written ones, and never shrinks. It needs no largest block:
// once one block holds the whole region, there is no next block to mark.
//
// One tuner per region: arrays differ in pattern. Pure logic, no kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "track/page_set.h"

namespace resurgo::track {

class GranularityTuner {
 public:
  // Appicpr's largest useful block: larger ones only add bytes.
  static constexpr std::size_t kDefaultMaxBlockBytes = std::size_t{4} << 20;
  static std::size_t default_max_block_pages();  // 4 MiB of system pages

  // `fixed_block_pages` = 0 tunes (from one page); otherwise that block, a
  // power of two, is used forever. `max_block_pages` (a power of two) bounds
  // the tuned block. Throws InvalidArgumentError for a size not a power of two.
  explicit GranularityTuner(std::size_t fixed_block_pages = 0,
                            std::size_t max_block_pages = default_max_block_pages());

  // Appicpr's doubling rule alone, from one page.
  static GranularityTuner doubling();

  // The tuner track.granularity asks for: 0 ("auto") tunes,
  // kDoublingGranularity doubles, a size in bytes (a power-of-two number of
  // pages) is fixed.
  static GranularityTuner for_setting(std::uint64_t granularity_bytes);

  // The block the tracker should use for the next interval.
  std::size_t block_pages() const { return std::size_t{1} << level_; }

  struct Decision {
    PageSet blocks_to_save;        // whole blocks holding a written page, clipped to the region
    std::size_t block_pages_used;  // the block in force during the interval
    std::size_t next_block_pages;  // block_pages() from now on
  };

  // `written`: what the tracker reported for the interval, collected with
  // block_pages(). `page_resolution`: the tracker reports pages (uffd,
  // soft-dirty) rather than whole blocks (mprotect, hash). Feed it the
  // intervals after the first collect, whose "every page" is no pattern.
  // An interval that wrote nothing changes nothing.
  Decision observe(const PageSet& written, bool page_resolution);

 private:
  // Written pages and pages of the blocks holding them at one level, summed
  // over intervals, older ones weighing less.
  struct Fill {
    double written = 0;
    double covered = 0;
    double ratio() const { return covered == 0 ? 1.0 : written / covered; }
  };
  // The blocks of one level that hold a written page.
  struct Cover {
    std::size_t pages = 0;  // their pages, clipped to the region
    std::size_t blocks = 0;
    std::size_t marked = 0;  // those whose next block also holds one
    // Appicpr's condition for doubling.
    bool marked_majority() const { return 2 * marked >= blocks; }
  };

  enum class Rule { kTuned, kDoubling, kFixed };

  GranularityTuner(Rule rule, unsigned level, unsigned max_level);

  void record(const std::vector<Cover>& covers, std::size_t written_pages, bool page_resolution);
  void adjust(const std::vector<Cover>& covers, std::size_t written_pages, bool page_resolution);

  Rule rule_;
  unsigned level_;  // the block is 2^level_ pages
  unsigned max_level_;  // tuned: the largest block's level
  std::vector<Fill> fills_;  // tuned: one per level, 0..max_level_
  std::size_t intervals_at_level_ = 0;  // with writes, since the block last changed
  bool probing_ = false;                // the block was halved to look below it
};

}  // namespace resurgo::track
