// A forked writer (capture.mode fork or auto) commits a version in a child
// process that inherits the parent's DirectoryLevel, its mutex included, in
// whatever state another thread of the parent left it at fork(). A commit
// in the child must therefore not wait on that mutex: here a thread of the
// parent takes it over and over while children are forked and commit, and
// every child must finish.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "../sanitized.h"
#include "resurgo/env.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

// The child's exit status, or -1 when it did not exit within `limit` (it
// is then killed).
int wait_for(pid_t child, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ForkedCommitTest, AChildCommitsWhileAThreadOfTheParentHoldsTheLevelsMutex) {
  if (kSanitized) GTEST_SKIP() << "the sanitizers' allocators are not fork-safe (tests/sanitized.h)";
  TempDir dir;
  DirectoryLevel level(2, dir.path() + "/l2", "store", 0, 0600, 100, Env::posix());
  level.prepare();
  std::atomic<bool> stop{false};
  // refuse_writes(nullptr) takes the level's mutex, as a listing or an
  // eviction does, and clears nothing.
  std::thread holder([&] {
    while (!stop.load(std::memory_order_relaxed)) level.refuse_writes(nullptr);
  });
  const std::vector<std::byte> data(4096, std::byte{7});
  int hung = 0;
  int failed = 0;
  for (int version = 0; version < 50; ++version) {
    const pid_t child = ::fork();
    if (child == 0) {
      try {
        level.commit(version, [&](WritableFile& file) { file.append(data.data(), data.size()); });
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    ASSERT_GT(child, 0);
    const int status = wait_for(child, std::chrono::seconds(10));
    hung += status == -1;
    failed += status > 0;
  }
  stop = true;
  holder.join();
  EXPECT_EQ(hung, 0) << "children that waited on the mutex a thread of the parent held at fork()";
  EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace resurgo
