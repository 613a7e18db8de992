// SIGKILL of a process in the middle of checkpointing: the next process must
// restore the newest version reported durable (or a newer one), bit for bit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

constexpr std::size_t kValues = 1 << 20;  // 8 MiB: writes take long enough to be interrupted

void fill(std::vector<double>& u, int version) {
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = version * 1e7 + static_cast<double>(i);
}

Config crash_config(const std::string& dir) {
  return Config::load("", {{"local.path", dir + "/l2"}, {"persistent.path", dir + "/l4"},
                           {"persistent.every", "2"}, {"log.level", "off"}});
}

// Child: checkpoints versions first, first+1, ... and reports each one on
// `report` once it is durable at L2. Never returns.
[[noreturn]] void run_child(const std::string& dir, int first, int report) {
  try {
    std::vector<double> u(kValues);
    Store store("crash", crash_config(dir));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version = first;; ++version) {
      fill(u, version);
      store.checkpoint(version);
      store.wait(version, 2);
      if (::write(report, &version, sizeof version) != sizeof version) _exit(4);
    }
  } catch (...) {
    _exit(3);
  }
}

TEST(CrashTest, SigkillDuringCheckpointingLosesNoDurableVersion) {
  TempDir dir;
  std::mt19937 random(12345);
  int next_version = 0;
  for (int trial = 0; trial < 8; ++trial) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      run_child(dir.path(), next_version, pipe_fds[1]);
    }
    ::close(pipe_fds[1]);
    int durable = -1;
    const int reports_wanted = 1 + static_cast<int>(random() % 3);
    for (int i = 0; i < reports_wanted; ++i) {
      ASSERT_EQ(::read(pipe_fds[0], &durable, sizeof durable), static_cast<ssize_t>(sizeof durable));
    }
    // A random delay spreads the kill over capture, write, rename and L4 copy.
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 40000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    for (int got = 0; ::read(pipe_fds[0], &got, sizeof got) == sizeof got;) durable = got;
    ::close(pipe_fds[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with status " << WEXITSTATUS(status);

    std::vector<double> u(kValues, 0.0);
    Store store("crash", crash_config(dir.path()));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    const int restored = store.restart();
    EXPECT_GE(restored, durable) << "trial " << trial;
    std::vector<double> expected(kValues);
    fill(expected, restored);
    EXPECT_EQ(u, expected) << "trial " << trial << " version " << restored;
    EXPECT_TRUE(store.last_restart().skipped.empty());
    next_version = *store.latest() + 1;
  }
}

}  // namespace
}  // namespace resurgo
