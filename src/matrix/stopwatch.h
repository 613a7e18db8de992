// Seconds since a start, on the steady clock: what MatrixStats' times add up.
#pragma once

#include <chrono>

namespace resurgo {

class Stopwatch {
 public:
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace resurgo
