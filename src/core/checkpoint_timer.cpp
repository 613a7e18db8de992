#include "core/checkpoint_timer.h"

#include <cmath>

namespace resurgo {

std::optional<double> CheckpointTimer::interval(std::optional<double> cost) const {
  switch (config_.policy) {
    case IntervalPolicy::kSeconds:
      return config_.seconds;
    case IntervalPolicy::kOverhead:
      if (!cost) return std::nullopt;
      return *cost / config_.max_overhead;
    case IntervalPolicy::kYoungDaly:
      if (!cost) return std::nullopt;
      return std::sqrt(2.0 * *cost * config_.mtbf);
    case IntervalPolicy::kNone:
      break;
  }
  return std::nullopt;
}

bool CheckpointTimer::due(double since_last, std::optional<double> cost) const {
  const std::optional<double> seconds = interval(cost);
  return !seconds || since_last >= *seconds;
}

void CheckpointTimer::checkpointed(double seconds) {
  cost_ = cost_ ? 0.75 * *cost_ + 0.25 * seconds : seconds;
  last_end_ = Clock::now();
}

}  // namespace resurgo
