// io/fork_safe_lock.h: a child forked while another thread holds the lock
// takes it over (a std::mutex would stay held in the child for ever: a
// forked writer hung so, syncing a directory its parent was syncing).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "io/fork_safe_lock.h"

namespace resurgo {
namespace {

TEST(ForkSafeLockTest, AChildForkedWhileAnotherThreadHoldsItTakesItOver) {
  ForkSafeLock lock;
  std::atomic<bool> held{false};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    std::lock_guard guard(lock);
    held = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!held) std::this_thread::yield();
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(10);  // a child that hangs is killed, and the test fails below
    { std::lock_guard guard(lock); }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  release = true;
  holder.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child could not take the lock";
}

TEST(ForkSafeLockTest, ThreadsOfOneProcessExcludeEachOther) {
  ForkSafeLock lock;
  int inside = 0;
  int most = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::lock_guard guard(lock);
        most = std::max(most, ++inside);
        --inside;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(most, 1);
}

}  // namespace
}  // namespace resurgo
