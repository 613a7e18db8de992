// The fork check of every call on a store (base/owner_process.h) asks the
// kernel for the process id only once a fork happened since the store
// opened (issue 27: getpid() was a system call per checkpoint and per
// restart, about a tenth of a small checkpoint into the memory level). The
// owner's calls ask for none, even after it forked a child; a child, and a
// child's child, are still refused.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace {

// getpid() calls made on a thread that counts them (the library's calls
// reach this definition: the test program's symbol comes first).
thread_local bool t_counting = false;
thread_local int t_getpid_calls = 0;

}  // namespace

extern "C" pid_t getpid() noexcept {
  if (t_counting) ++t_getpid_calls;
  return static_cast<pid_t>(::syscall(SYS_getpid));
}

namespace resurgo {
namespace {

// The getpid() calls `body` makes on this thread.
template <typename Body>
int getpid_calls(Body&& body) {
  t_getpid_calls = 0;
  t_counting = true;
  body();
  t_counting = false;
  return t_getpid_calls;
}

Config memory_only(const TempDir& dir) {
  return Config::load("", {{"memory.every", "1"},
                           {"memory.keep", "2"},
                           {"local.every", "0"},
                           {"local.path", dir.path() + "/l2"},
                           {"persistent.every", "0"},
                           {"log.level", "off"}});
}

// Runs `body` in a forked child; its exit status (99: `body` threw).
int in_child(const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// 0 when a checkpoint of `store` is refused as inherited, else why not.
int refused_as_inherited(Store& store, int version) {
  try {
    store.checkpoint(version);
    return 2;
  } catch (const StateError& error) {
    return std::string(error.what()).find("forked from it") != std::string::npos ? 0 : 3;
  }
}

class OwnerProcessTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::vector<double> state = std::vector<double>(512, 1.0);
  Store store{"owner", memory_only(dir)};

  void SetUp() override { store.protect(0, state.data(), state.size() * sizeof(double), "u"); }
  // Checkpoints versions [first, first + count) of the memory route, each
  // restored back.
  void checkpoint_and_restart(int first, int count) {
    for (int version = first; version < first + count; ++version) {
      std::fill(state.begin(), state.end(), version);
      store.checkpoint(version);
      std::fill(state.begin(), state.end(), 0.0);
      ASSERT_EQ(store.restart(version), version);
      ASSERT_EQ(state, std::vector<double>(state.size(), version));
    }
  }
};

TEST_F(OwnerProcessTest, CheckpointsAndRestartsOfTheOwnerAskForNoProcessId) {
  EXPECT_EQ(getpid_calls([&] { checkpoint_and_restart(1, 50); }), 0);
}

TEST_F(OwnerProcessTest, TheOwnerAsksForNoProcessIdAfterItForkedAChild) {
  checkpoint_and_restart(1, 2);
  ASSERT_EQ(in_child([&] { return refused_as_inherited(store, 3); }), 0) << "the child's checkpoint was not refused";
  EXPECT_EQ(getpid_calls([&] { checkpoint_and_restart(3, 10); }), 0);
}

TEST_F(OwnerProcessTest, AChildOfAChildIsRefusedToo) {
  checkpoint_and_restart(1, 1);
  const int status = in_child([&] { return in_child([&] { return refused_as_inherited(store, 2); }); });
  EXPECT_EQ(status, 0) << "the grandchild's checkpoint was not refused";
  checkpoint_and_restart(2, 1);
}

}  // namespace
}  // namespace resurgo
