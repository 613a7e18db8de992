// Writes the newest automatic checkpoint to L2 when the process is told to
// terminate (SIGTERM, SIGINT), for stores that keep versions only in memory
// (the OPS paper's in-memory checkpointing). The signal handler only writes
// the signal number to a pipe (async-signal-safe); a watcher thread reads
// it, runs the flush, restores the previous disposition and raises the
// signal again, so the process still ends the way it would have.
#pragma once

#include <functional>
#include <thread>

namespace resurgo::autockpt {

class TerminationFlush {
 public:
  // `flush` runs on the watcher thread. One instance per process at a time
  // (StateError otherwise): a signal has one handler.
  explicit TerminationFlush(std::function<void(int signal)> flush);
  ~TerminationFlush();  // restores the previous handlers, stops the watcher
  TerminationFlush(const TerminationFlush&) = delete;
  TerminationFlush& operator=(const TerminationFlush&) = delete;

 private:
  void watch();

  std::function<void(int)> flush_;
  int pipe_[2] = {-1, -1};
  std::thread watcher_;
};

}  // namespace resurgo::autockpt
