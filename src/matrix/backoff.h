// Waiting politely for other ranks: a few quick retries (an answer that
// comes within microseconds costs no sleep), then sleeps growing from 50 us
// to 1 ms, so that a waiting rank or progress thread leaves the core to the
// ranks it waits for when a node runs more ranks than it has cores.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace resurgo {

class Backoff {
 public:
  // Something happened: the next wait starts quick again.
  void reset() {
    retries_ = 0;
    pause_ = kFirstPause;
  }
  // Nothing happened: wait a little longer than last time.
  void pause() {
    if (retries_ < kQuickRetries) {
      ++retries_;
      return;
    }
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, kLongestPause);
  }

 private:
  static constexpr int kQuickRetries = 64;
  static constexpr std::chrono::microseconds kFirstPause{50};
  static constexpr std::chrono::microseconds kLongestPause{1000};

  int retries_ = 0;
  std::chrono::microseconds pause_ = kFirstPause;
};

}  // namespace resurgo
