// The paper's always-on progress thread (section III-C1): it applies bins as
// they arrive while the application computes, so the senders' buffers drain
// and their backpressure eases without the application calling in. It polls
// with a Backoff, so on a node with more ranks than cores it sleeps instead
// of taking a core from the application.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace resurgo {

class ProgressThread {
 public:
  // Starts calling `poll` (true when it found work) until stop().
  explicit ProgressThread(std::function<bool()> poll);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  void stop();
  // What poll() threw, if it did (the thread ended there): rethrown on the
  // application thread, once.
  void rethrow_failure();

 private:
  void run();

  std::function<bool()> poll_;
  std::atomic<bool> stopping_{false};
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace resurgo
