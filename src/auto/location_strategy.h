// Where to enter checkpointing regions (the OPS paper, section 5.2): for
// every loop executed, the bytes a region entered before it would save, and
// per loop name how often it recurs and the mean and spread of those bytes.
// At the first due checkpoint the recurring loop with the least to save is
// chosen.
//
// A region entered before loop s saves every ever-written part except those
// whose first access in its window is a write without a read. The window
// ends where the region would close at the latest: when loop s's name comes
// round again (a whole period of the application has passed; a part not met
// by then is not met at all) or after `timeout_loops` loops. Each part keeps
// the accesses of the open windows, so a start's total is found with one
// binary search per part when its window ends.
#pragma once

#include <cstdint>
#include <deque>
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
  explicit LocationStrategy(std::uint64_t timeout_loops);

  // Loop `loop_index` (consecutive from one call to the next) with its
  // merged part accesses.
  void observe(std::string_view loop, std::uint64_t loop_index, std::span<const PartAccess> accesses,
               const DatasetTable& datasets);
  // Starts over (after initphase_done: what was written before no longer counts).
  void reset();
  // The loops whose windows ended at least twice, recurring within the
  // timeout, least bytes first (then smaller spread, then more frequent).
  std::vector<LocationCandidate> ranking() const;
  std::vector<std::string> loops() const;  // every loop name observed
  // The mean bytes of the windows of `loop` that ended; none before one did.
  std::optional<double> mean_bytes(std::string_view loop) const;
  std::uint64_t bookkeeping_bytes() const;

 private:
  struct LoopStatistics {
    std::uint64_t occurrences = 0;  // windows ended
    double sum = 0;
    double sum_of_squares = 0;
    std::uint64_t first_index = 0;
    std::uint64_t last_index = 0;
    std::uint64_t open_start = 0;  // the start of this name whose window is open; 0 = none
  };
  struct Start {
    std::uint64_t loop_index = 0;
    LoopStatistics* loop = nullptr;
  };
  struct Access {
    std::uint64_t loop_index = 0;
    bool write_first = false;
  };
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };

  void finish(const Start& start, const DatasetTable& datasets);
  std::deque<Access>& history(const PartAccess& access);

  std::uint64_t timeout_loops_;
  std::unordered_map<std::string, LoopStatistics, TransparentHash, std::equal_to<>> loops_;
  std::deque<Start> open_;                   // ascending loop index
  std::vector<std::deque<Access>> history_;  // per part (dataset * 2 + part), within the open windows
};

}  // namespace resurgo::autockpt
