// The library's one clock for durations (steady: never set back), and the
// seconds elapsed since a point of it.
#pragma once

#include <chrono>

namespace resurgo {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

}  // namespace resurgo
