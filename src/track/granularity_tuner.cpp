#include "track/granularity_tuner.h"

#include <algorithm>
#include <bit>
#include <string>
#include <utility>

#include "core/config_names.h"
#include "resurgo/errors.hpp"
#include "track/tracker.h"

namespace resurgo::track {
namespace {

// Halve when an interval fills its blocks less than this: at steady state
// every checkpoint saves at most 8/7 = 1.14x the bytes written, under the
// 1.15x the delta capture promises at page resolution.
constexpr double kShrinkBelow = 7.0 / 8.0;
// Double only when the doubled block would be filled at least this much, both
// in this interval and in the recent ones together. 1/16 above kShrinkBelow,
// so the pattern that grew a block does not halve it again at the next
// interval; the recent intervals keep a pattern that moves (Himeno's range of
// slices) from growing on one lucky interval.
constexpr double kGrowFrom = 15.0 / 16.0;
// The weight of the past in the recent fill: multiplied by this per interval
// with writes, so it spans about 8 intervals (7/8^8 = 0.34). Measured on a
// Himeno range of 1 to 8 random slices of 16 pages: the block went to two
// slices and back once per 300 intervals with 3/4, once per 20,000 with 7/8.
constexpr double kKeep = 7.0 / 8.0;
// Without page resolution, try half the block after this many intervals at
// one block. A probe never saves more bytes (smaller blocks are subsets of
// larger ones); it costs mprotect at most twice the faults of one interval,
// so at most 1/8 more faults over time, and a pattern that shrank is found
// within 8 checkpoints.
constexpr std::size_t kProbeEvery = 8;

using PageRuns = std::vector<std::pair<std::size_t, std::size_t>>;  // first, count

PageRuns runs_of(const PageSet& written) {
  PageRuns runs;
  written.for_each_run(
      [&](std::size_t first, std::size_t count) { runs.emplace_back(first, count); });
  return runs;
}

// Calls fn(first, last) for each maximal range of consecutive blocks of
// 2^level pages that hold a written page.
template <class Fn>
void for_each_block_range(const PageRuns& runs, unsigned level, Fn&& fn) {
  bool open = false;
  std::size_t first = 0;
  std::size_t last = 0;
  for (const auto& [page, count] : runs) {
    const std::size_t run_first = page >> level;
    const std::size_t run_last = (page + count - 1) >> level;
    if (open && run_first <= last + 1) {
      last = run_last;
      continue;
    }
    if (open) fn(first, last);
    first = run_first;
    last = run_last;
    open = true;
  }
  if (open) fn(first, last);
}

unsigned checked_level(std::size_t pages, const char* what) {
  if (!std::has_single_bit(pages)) {
    throw InvalidArgumentError("track: the " + std::string(what) + " of " + std::to_string(pages) +
                               " pages is not a power of two; set track.granularity to a power "
                               "of two times the page size, or to auto");
  }
  return static_cast<unsigned>(std::countr_zero(pages));
}

}  // namespace

std::size_t GranularityTuner::default_max_block_pages() {
  return std::max<std::size_t>(1, kDefaultMaxBlockBytes / page_size());
}

GranularityTuner::GranularityTuner(Rule rule, unsigned level, unsigned max_level)
    : rule_(rule), level_(level), max_level_(max_level), fills_(rule == Rule::kTuned ? max_level + 1 : 0) {}

GranularityTuner::GranularityTuner(std::size_t fixed_block_pages, std::size_t max_block_pages)
    : GranularityTuner(fixed_block_pages != 0 ? Rule::kFixed : Rule::kTuned,
                       fixed_block_pages != 0 ? checked_level(fixed_block_pages, "management block") : 0,
                       checked_level(max_block_pages, "largest management block")) {}

// No largest level: the rule stops once one block holds the region.
GranularityTuner GranularityTuner::doubling() { return GranularityTuner(Rule::kDoubling, 0, 0); }

GranularityTuner GranularityTuner::for_setting(std::uint64_t granularity_bytes) {
  if (granularity_bytes == kDoublingGranularity) return doubling();
  return GranularityTuner(static_cast<std::size_t>(granularity_bytes / page_size()));
}

GranularityTuner::Decision GranularityTuner::observe(const PageSet& written, bool page_resolution) {
  const PageRuns runs = runs_of(written);
  Decision decision{PageSet(written.pages()), block_pages(), block_pages()};
  for_each_block_range(runs, level_, [&](std::size_t first, std::size_t last) {
    decision.blocks_to_save.insert_range(first << level_, (last - first + 1) << level_);
  });
  if (rule_ == Rule::kFixed || runs.empty()) return decision;

  const auto cover_at = [&](unsigned level) {
    Cover cover;
    for_each_block_range(runs, level, [&](std::size_t first, std::size_t last) {
      cover.pages += std::min((last + 1) << level, written.pages()) - (first << level);
      cover.blocks += last - first + 1;
      cover.marked += last - first;
    });
    return cover;
  };
  if (rule_ == Rule::kDoubling) {
    // Appicpr's rule alone. It stops by itself: a block that holds the whole
    // region has no next block to mark.
    if (cover_at(level_).marked_majority()) ++level_;
  } else {
    std::vector<Cover> covers;
    for (unsigned level = 0; level <= max_level_; ++level) covers.push_back(cover_at(level));
    record(covers, written.count(), page_resolution);
    adjust(covers, written.count(), page_resolution);
  }
  decision.next_block_pages = block_pages();
  return decision;
}

// Levels at or below a block reported whole look full whatever was written
// in them, so only the levels above it learn from such an interval.
void GranularityTuner::record(const std::vector<Cover>& covers, std::size_t written_pages,
                              bool page_resolution) {
  const unsigned first_seen = page_resolution ? 0 : level_ + 1;
  for (unsigned level = 0; level <= max_level_; ++level) {
    Fill& fill = fills_[level];
    fill.written *= kKeep;
    fill.covered *= kKeep;
    if (level < first_seen) continue;
    fill.written += static_cast<double>(written_pages);
    fill.covered += static_cast<double>(covers[level].pages);
  }
}

void GranularityTuner::adjust(const std::vector<Cover>& covers, std::size_t written_pages,
                              bool page_resolution) {
  const auto fill_now = [&](unsigned level) {
    return static_cast<double>(written_pages) / static_cast<double>(covers[level].pages);
  };
  if (level_ < max_level_ && covers[level_].marked_majority() && fill_now(level_ + 1) >= kGrowFrom &&
      fills_[level_ + 1].ratio() >= kGrowFrom) {
    ++level_;
    intervals_at_level_ = 0;
    probing_ = false;
    return;
  }
  if (level_ == 0) return;
  if (page_resolution) {
    if (fill_now(level_) < kShrinkBelow) --level_;
    return;
  }
  // A probe that was not taken back found a smaller pattern: look further down.
  if (probing_ || ++intervals_at_level_ >= kProbeEvery) {
    --level_;
    intervals_at_level_ = 0;
    probing_ = true;
  }
}

}  // namespace resurgo::track
