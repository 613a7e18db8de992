// Paces background work to a share of the wall time: before each step it
// sleeps (1 - share) / share of the time the step before took (from the end
// of the last pause). A compaction streams a whole chain through the caches
// and the memory bus that the application's cores share: on an otherwise
// idle machine the application's own CPU time per step rose by about a
// sixth while one ran (bench/results/compaction_paced/incremental.md,
// the "before" column).
// Paced, the same work disturbs it only that share of the time, as the rate
// limits of LSM-tree compactions do; the compaction takes 1 / share as long.
// Once something waits for the work (a store's close, a restart of the
// newest version), `hurried` says so and the pauses stop.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "base/clock.h"

namespace resurgo {

class Pacer {
 public:
  using Hurried = std::function<bool()>;
  using Now = std::function<Clock::time_point()>;
  using Sleep = std::function<void(Clock::duration)>;

  // `share` in (0, 1]; 1 never pauses, nor does a step while `hurried`
  // (none: never) says true. `now` and `sleep` are the clock's and the
  // thread's unless a test gives its own.
  explicit Pacer(double share, Hurried hurried = {}, Now now = Clock::now,
                 Sleep sleep = [](Clock::duration pause) { std::this_thread::sleep_for(pause); })
      : pause_per_work_((1 - share) / share),
        hurried_(std::move(hurried)),
        now_(std::move(now)),
        sleep_(std::move(sleep)) {}

  void before_step() {
    if (resumed_ && pause_per_work_ > 0 && !(hurried_ && hurried_())) {
      const auto worked = now_() - *resumed_;
      sleep_(std::chrono::duration_cast<Clock::duration>(worked * pause_per_work_));
    }
    resumed_ = now_();
  }

 private:
  double pause_per_work_;
  Hurried hurried_;
  Now now_;
  Sleep sleep_;
  std::optional<Clock::time_point> resumed_;  // none before the first step
};

}  // namespace resurgo
