// A store closed while a child forked from its process has not run yet
// (fork capture's writer of another store, under load) must open again at
// once: the child holds a copy of every lock descriptor until its atfork
// handler lets go of them, and closing the parent's copy alone does not
// release a flock lock while that copy lives (the stress campaign's
// "'.../l4/stressN/.lock.rN' is locked" at reopen).
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resurgo/env.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

// A child forked by the raw system call runs no atfork handler: it stands
// for a child of fork() that the kernel has not scheduled yet, holding
// every descriptor of this process, lock descriptors included. It only
// waits, in system calls, until it is killed.
class UnscheduledChild {
 public:
  UnscheduledChild() {
    pid_ = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (pid_ < 0) throw std::runtime_error("clone failed");
    if (pid_ == 0) {
      for (;;) ::syscall(SYS_ppoll, nullptr, 0, nullptr, nullptr, 0);
    }
  }
  ~UnscheduledChild() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  UnscheduledChild(const UnscheduledChild&) = delete;
  UnscheduledChild& operator=(const UnscheduledChild&) = delete;

 private:
  pid_t pid_ = -1;
};

TEST(ReopenLockTest, ALockReleasedWhileAForkedChildHoldsItsDescriptorCanBeTakenAgain) {
  TempDir dir;
  const std::string path = dir.path() + "/.lock.r000000";
  const std::shared_ptr<Env> env = Env::posix();
  std::unique_ptr<FileLock> held = env->lock(path);
  const UnscheduledChild child;
  held.reset();
  EXPECT_NO_THROW(held = env->lock(path));
}

TEST(ReopenLockTest, AStoreClosedWhileAForkedChildHoldsItsLocksOpensAgainAtOnce) {
  TempDir dir;
  const Config config = Config::load("", {{"local.path", dir.path() + "/l2"},
                                          {"persistent.path", dir.path() + "/l4"},
                                          {"persistent.every", "1"},
                                          {"log.level", "off"}});
  std::vector<int> state(1000, 7);
  {
    Store writer("s", config);
    writer.protect(0, state.data(), state.size() * sizeof(int), "state");
    writer.checkpoint(1);  // prepares (and locks) L2 and L4
    writer.wait();
    const UnscheduledChild child;
    writer.close();
    state.assign(state.size(), 0);
    Store reader("s", config);
    reader.protect(0, state.data(), state.size() * sizeof(int), "state");
    EXPECT_EQ(reader.restart(), 1);
  }
  EXPECT_EQ(state, std::vector<int>(1000, 7));
}

}  // namespace
}  // namespace resurgo
