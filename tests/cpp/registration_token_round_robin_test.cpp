// The registration token handed in turn among the processes of a node
// (issue 30 part 4): forked processes registering in a loop hold it round
// robin, a process killed while holding or waiting blocks nobody, a newcomer
// does not jump the queue, and files planted in the token's directory are
// refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../sanitized.h"
#include "gpu/registration_token.h"
#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kChildPatience(10'000);  // far beyond any turn here
constexpr uid_t kAnotherUser = 65534;           // nobody

class RegistrationTokenRoundRobinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kSanitized) GTEST_SKIP() << "forks, which the sanitizers' allocators do not survive (tests/sanitized.h)";
    ASSERT_EQ(::pipe(log_), 0);
  }
  void TearDown() override {
    for (const pid_t child : children_) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    for (const int end : log_) {
      if (end >= 0) ::close(end);
    }
  }

  std::string own_directory() const { return dir_.path() + "/resurgo-" + std::to_string(::geteuid()); }
  std::string file(const std::string& name) const { return own_directory() + "/" + name; }

  // Tickets held by waiters and holders of the token "pin".
  int tickets() const {
    int count = 0;
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(own_directory(), ignored)) {
      if (entry.path().filename().string().rfind("pin.ticket-", 0) == 0) ++count;
    }
    return count;
  }

  // A child that takes the token `turns` times, writes `mark` to the log
  // each time it holds it, keeps it `hold` long (for ever: negative), and
  // exits 0, or 2 when it waited past kChildPatience.
  pid_t start_child(char mark, int turns, milliseconds hold) {
    const pid_t child = ::fork();
    if (child != 0) {
      children_.push_back(child);
      return child;
    }
    const RegistrationToken token(dir_.path(), "pin");
    for (int turn = 0; turn < turns; ++turn) {
      const RegistrationToken::Hold held = token.acquire_for(kChildPatience);
      if (!held) ::_exit(2);
      if (::write(log_[1], &mark, 1) != 1) ::_exit(3);
      if (hold.count() < 0) ::pause();
      std::this_thread::sleep_for(hold);
    }
    ::_exit(0);
  }

  // The exit status of `child`, reaped.
  int exit_status(pid_t child) {
    int status = 0;
    EXPECT_EQ(::waitpid(child, &status, 0), child);
    std::erase(children_, child);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void kill_child(pid_t child) {
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    EXPECT_EQ(exit_status(child), 128 + SIGKILL);
  }

  // The next mark in the log (waits for it), or '\0' once every writer is gone.
  char next_mark() {
    char mark = '\0';
    return ::read(log_[0], &mark, 1) == 1 ? mark : '\0';
  }

  ::TempDir dir_;
  int log_[2] = {-1, -1};
  std::vector<pid_t> children_;
};

TEST_F(RegistrationTokenRoundRobinTest, ProcessesRegisteringInALoopHoldTheTokenInTurn) {
  constexpr int kProcesses = 3;
  constexpr int kTurns = 4;
  const RegistrationToken token(dir_.path(), "pin");
  RegistrationToken::Hold first = token.try_acquire();
  ASSERT_TRUE(first);
  for (int i = 0; i < kProcesses; ++i) start_child(static_cast<char>('a' + i), kTurns, milliseconds(30));
  ASSERT_TRUE(eventually([&] { return tickets() == kProcesses + 1; })) << "every child queued behind us";
  first.release();
  for (const pid_t child : std::vector<pid_t>(children_)) EXPECT_EQ(exit_status(child), 0);
  ::close(log_[1]);
  log_[1] = -1;
  std::string order;
  for (char mark = next_mark(); mark != '\0'; mark = next_mark()) order += mark;
  ASSERT_EQ(order.size(), std::size_t{kProcesses * kTurns}) << order;
  // Round robin: the first round names each process once, and each one
  // holds again only after every other one has held once (N-1 turns).
  EXPECT_EQ(std::string(order.begin(), order.begin() + kProcesses).find_first_not_of("abc"), std::string::npos);
  for (std::size_t i = kProcesses; i < order.size(); ++i) {
    EXPECT_EQ(order[i], order[i - kProcesses]) << "holders in order: " << order;
  }
  EXPECT_EQ(tickets(), 0);
}

TEST_F(RegistrationTokenRoundRobinTest, AHolderKilledWhileHoldingLetsTheNextWaiterIn) {
  const pid_t holder = start_child('h', 1, milliseconds(-1));
  ASSERT_EQ(next_mark(), 'h');
  const pid_t waiter = start_child('w', 1, milliseconds(0));
  ASSERT_TRUE(eventually([&] { return tickets() == 2; }));
  EXPECT_FALSE(RegistrationToken(dir_.path(), "pin").try_acquire());
  kill_child(holder);
  EXPECT_EQ(next_mark(), 'w');
  EXPECT_EQ(exit_status(waiter), 0);
  EXPECT_TRUE(RegistrationToken(dir_.path(), "pin").try_acquire());
  EXPECT_EQ(tickets(), 0) << "the dead holder's ticket is removed";
}

TEST_F(RegistrationTokenRoundRobinTest, AWaiterKilledWhileWaitingIsSkipped) {
  const RegistrationToken token(dir_.path(), "pin");
  RegistrationToken::Hold held = token.try_acquire();
  ASSERT_TRUE(held);
  const pid_t killed = start_child('k', 1, milliseconds(0));
  ASSERT_TRUE(eventually([&] { return tickets() == 2; }));
  const pid_t behind = start_child('b', 1, milliseconds(0));
  ASSERT_TRUE(eventually([&] { return tickets() == 3; }));
  kill_child(killed);
  held.release();
  EXPECT_EQ(next_mark(), 'b');
  EXPECT_EQ(exit_status(behind), 0);
  EXPECT_EQ(tickets(), 0);
}

TEST_F(RegistrationTokenRoundRobinTest, ANewcomerDoesNotJumpTheQueueAndOneGivingUpLeavesIt) {
  const RegistrationToken token(dir_.path(), "pin");
  RegistrationToken::Hold held = token.try_acquire();
  ASSERT_TRUE(held);
  EXPECT_FALSE(token.acquire_for(milliseconds(20)));
  EXPECT_EQ(tickets(), 1) << "the ticket of the one that gave up is removed";
  const pid_t waiter = start_child('w', 1, milliseconds(200));
  ASSERT_TRUE(eventually([&] { return tickets() == 2; }));
  held.release();
  EXPECT_FALSE(token.try_acquire()) << "the token is free, but a process waits for it";
  EXPECT_EQ(next_mark(), 'w');
  EXPECT_EQ(exit_status(waiter), 0);
  EXPECT_TRUE(token.try_acquire());
}

TEST_F(RegistrationTokenRoundRobinTest, AQueueRemovedByHandWhileAProcessWaitsStartsAgainFromItsTicket) {
  const RegistrationToken token(dir_.path(), "pin");
  RegistrationToken::Hold held = token.try_acquire();  // ticket 0
  ASSERT_TRUE(held);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(token.try_acquire());  // tickets 1 to 3, given up
  const pid_t waiter = start_child('w', 1, milliseconds(0));  // ticket 4
  ASSERT_TRUE(eventually([&] {
    std::stringstream queue;
    queue << std::ifstream(file("pin.queue")).rdbuf();
    return queue.str() == "next 5 serving 0\n";  // the waiter's ticket written
  }));
  std::filesystem::remove(file("pin.queue"));
  held.release();
  EXPECT_EQ(next_mark(), 'w');
  EXPECT_EQ(exit_status(waiter), 0);
  EXPECT_TRUE(token.try_acquire()) << "the queue the waiter wrote is whole";
  EXPECT_EQ(tickets(), 0);
}

// A StorageError naming `path` from try_acquire().
void expect_refused(const RegistrationToken& token, const std::string& path) {
  try {
    token.try_acquire();
    ADD_FAILURE() << "no error for " << path;
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

TEST_F(RegistrationTokenRoundRobinTest, TheQueueIsA0600FileAndADamagedOrLinkedOneIsRefused) {
  const RegistrationToken token(dir_.path(), "pin");
  ASSERT_TRUE(token.try_acquire());
  struct stat info {};
  ASSERT_EQ(::stat(file("pin.queue").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  std::ofstream(file("pin.queue")) << "next 1 serving 2\n";  // serving beyond next
  expect_refused(token, file("pin.queue"));
  std::ofstream(file("pin.queue")) << std::string(65, '7');
  expect_refused(token, file("pin.queue"));
  std::filesystem::remove(file("pin.queue"));
  ASSERT_EQ(::symlink((dir_.path() + "/elsewhere").c_str(), file("pin.queue").c_str()), 0);
  expect_refused(token, file("pin.queue"));
  std::filesystem::remove(file("pin.queue"));
  EXPECT_TRUE(token.try_acquire()) << "a removed queue starts again";
}

TEST_F(RegistrationTokenRoundRobinTest, FilesPlantedByAnotherUserAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "planting a file of another user needs root";
  const RegistrationToken token(dir_.path(), "pin");
  ASSERT_TRUE(token.try_acquire());
  for (const std::string name : {"pin.queue", "pin.guard", "pin.ticket-0"}) {
    std::ofstream(file(name)) << "next 1 serving 1\n";
    ASSERT_EQ(::chown(file(name).c_str(), kAnotherUser, kAnotherUser), 0);
    expect_refused(token, file(name));
    std::filesystem::remove(file(name));
  }
  EXPECT_TRUE(token.try_acquire());
}

}  // namespace
}  // namespace resurgo::gpu
