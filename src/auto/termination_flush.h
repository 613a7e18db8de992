// Writes the newest automatic checkpoint to L2 when the process is told to
// terminate (SIGTERM, SIGINT), for stores that keep versions only in memory
// (the OPS paper's in-memory checkpointing). The signal handler only writes
// the signal number to a pipe (async-signal-safe); a watcher thread reads
// it, runs the flush, restores the previous disposition and raises the
// signal again, so the process still ends the way it would have.
//
// The pipe's write end does not block: a flood of signals fills it while the
// watcher flushes, and one pending byte is all the watcher needs, so the
// handler drops the rest instead of blocking whichever thread it interrupted.
//
// A child forked by the application inherits the handlers and the pipe, but
// not the watcher, which belongs to the parent: in the child a signal takes
// the disposition that was there before (nothing reaches the parent), and
// the destructor neither writes to the pipe nor joins the watcher.
#pragma once

#include <functional>
#include <thread>

#include <sys/types.h>

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
  pid_t owner_ = -1;  // the process whose thread watches the pipe
  std::thread watcher_;
};

}  // namespace resurgo::autockpt
