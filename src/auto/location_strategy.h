// Where to enter checkpointing regions (the OPS paper, section 5.2): for
// every loop executed, the bytes a region entered before it would save, and
// per loop name how often it recurs and the mean and spread of those bytes.
// At the first due checkpoint the recurring loop with the least to save is
// chosen.
//
// A region entered before loop s saves every ever-written part except those
// whose first access in [s, s + window) is a write without a read. Rather
// than simulate a region per loop, each write-first access of a part at loop
// i credits its bytes to every start in (previous access of the part, i]: a
// difference array over the open window makes that O(1) per access, and a
// start's total is final once the window has passed it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auto/dataset_table.h"

namespace resurgo::autockpt {

struct LocationCandidate {
  std::string loop;
  std::uint64_t occurrences = 0;
  double mean_bytes = 0;      // the bytes a region entered there saves
  double spread_bytes = 0;    // their standard deviation
  double mean_spacing = 0;    // loops between occurrences
};

class LocationStrategy {
 public:
  explicit LocationStrategy(std::uint64_t window_loops);

  // Loop `loop_index` (consecutive from one call to the next) with its
  // merged part accesses.
  void observe(std::string_view loop, std::uint64_t loop_index, std::span<const PartAccess> accesses,
               const DatasetTable& datasets);
  // Starts over (after initphase_done: what was written before no longer counts).
  void reset();
  // The loops seen at least twice, at most a window apart on average,
  // least bytes first (then smaller spread, then more frequent).
  std::vector<LocationCandidate> ranking() const;
  std::uint64_t bookkeeping_bytes() const;

 private:
  struct LoopStatistics {
    std::uint64_t occurrences = 0;
    double sum = 0;
    double sum_of_squares = 0;
    std::uint64_t first_index = 0;
    std::uint64_t last_index = 0;
  };
  struct Start {
    LoopStatistics* loop = nullptr;
    std::int64_t difference = 0;  // of the dropped bytes, at this start
  };
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };

  Start& slot(std::uint64_t loop_index) { return window_[loop_index % window_.size()]; }
  void finish_start(std::uint64_t loop_index, const DatasetTable& datasets);
  std::uint64_t& last_access(const PartAccess& access);

  std::uint64_t window_loops_;
  std::vector<Start> window_;  // window + 1 slots: the open starts and the one closing
  std::unordered_map<std::string, LoopStatistics, TransparentHash, std::equal_to<>> loops_;
  std::vector<std::uint64_t> last_access_;  // per part (dataset * 2 + part), 0 = none
  std::uint64_t first_index_ = 0;  // first loop observed since the last reset
  std::int64_t dropped_ = 0;       // running sum of the differences up to the start closing
};

}  // namespace resurgo::autockpt
