// A lock that a forked child can take over. fork() copies only the thread
// that calls it: a std::mutex that another thread of the parent held at that
// moment stays held in the child for ever, and a forked writer (capture.mode
// fork or auto) commits in such a child, syncing the directories its parent
// syncs. This lock records its holder's process: a child finds its parent's
// id there and takes the lock over (the holding thread does not exist in the
// child); the threads of one process wait for each other, as with a mutex.
// For short, rare sections (a directory's first sync): a waiter sleeps.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace resurgo {

class ForkSafeLock {
 public:
  void lock() {
    const pid_t self = ::getpid();
    for (;;) {
      pid_t holder = 0;
      if (holder_.compare_exchange_strong(holder, self, std::memory_order_acquire)) return;
      if (holder != self && holder_.compare_exchange_strong(holder, self, std::memory_order_acquire)) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  void unlock() { holder_.store(0, std::memory_order_release); }

 private:
  std::atomic<pid_t> holder_{0};
};

}  // namespace resurgo
