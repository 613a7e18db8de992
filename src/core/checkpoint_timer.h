// When to checkpoint next (Store::need_checkpoint, `[interval]`): the
// interval the configured policy gives for the measured cost of a
// checkpoint. interval(cost) and due(since_last, cost) are pure arithmetic on
// durations, so that tests need no clock.
//
//   seconds     a fixed interval
//   overhead    the cost is at most `max_overhead` of the interval, as SCR's
//               SCR_CHECKPOINT_OVERHEAD: interval = cost / max_overhead
//   young-daly  Young's first-order optimum for a mean time between
//               failures M: interval = sqrt(2 * cost * M) (Daly's
//               refinement differs by less than the cost while cost << M)
#pragma once

#include <optional>

#include "base/clock.h"
#include "resurgo/config.hpp"

namespace resurgo {

class CheckpointTimer {
 public:
  explicit CheckpointTimer(const Config::Interval& config) : config_(config) {}

  // A checkpoint just ended after blocking `seconds`: the cost is a moving
  // average (a quarter on the newest), so that one slow checkpoint does not
  // swing the interval, and the next interval starts now.
  void checkpointed(double seconds);
  // The interval for the measured cost; whether a checkpoint is due now.
  std::optional<double> interval() const { return interval(cost_); }
  bool due() const { return due(seconds_since(last_end_), cost_); }

  // The interval in seconds for `cost` (the seconds a checkpoint costs the
  // application); none while a policy that needs a cost has none yet.
  std::optional<double> interval(std::optional<double> cost) const;
  // Whether a checkpoint is due `since_last` seconds after the last one
  // ended (or after open). Without a measured cost a cost-based policy
  // says yes: the first checkpoint measures it.
  bool due(double since_last, std::optional<double> cost) const;

 private:
  Config::Interval config_;
  Clock::time_point last_end_ = Clock::now();  // of the last checkpoint, or the open
  std::optional<double> cost_;                 // seconds a checkpoint blocks, averaged
};

}  // namespace resurgo
