// Paces background work to a share of the wall time: before each step it
// sleeps (1 - share) / share of the time the step before took (from the end
// of the last pause). A compaction streams a whole chain through the caches
// and the memory bus that the application's cores share: on an otherwise
// idle machine the application's own CPU time per step rose by about a
// tenth while one ran (bench/results/compaction_paced/incremental.md,
// the "before" column).
// Paced, the same work disturbs it only that share of the time, as the rate
// limits of LSM-tree compactions do; the compaction takes 1 / share as long.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "base/clock.h"

namespace resurgo {

class Pacer {
 public:
  using Now = std::function<Clock::time_point()>;
  using Sleep = std::function<void(Clock::duration)>;

  // `share` in (0, 1]; 1 never pauses. `now` and `sleep` are the clock's and
  // the thread's unless a test gives its own.
  explicit Pacer(double share, Now now = Clock::now,
                 Sleep sleep = [](Clock::duration pause) { std::this_thread::sleep_for(pause); })
      : pause_per_work_((1 - share) / share), now_(std::move(now)), sleep_(std::move(sleep)) {}

  void before_step() {
    if (resumed_ && pause_per_work_ > 0) {
      const auto worked = now_() - *resumed_;
      sleep_(std::chrono::duration_cast<Clock::duration>(worked * pause_per_work_));
    }
    resumed_ = now_();
  }

 private:
  double pause_per_work_;
  Now now_;
  Sleep sleep_;
  std::optional<Clock::time_point> resumed_;  // none before the first step
};

}  // namespace resurgo
