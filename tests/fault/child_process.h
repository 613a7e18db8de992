// Children of the fault campaigns: a forked process with a pipe on which it
// reports to the driver, reaped into a wait status the summary can describe.
#pragma once

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace resurgo::fault {

struct Child {
  pid_t pid = -1;
  int messages = -1;  // the driver's end of the child's report pipe
};

// Forks; the child runs `body(write end of the pipe)`, which must not return.
template <class Body>
Child start(Body&& body) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    body(fds[1]);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// Reaps the child and returns its wait status.
inline int finish(Child& child) {
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.messages);
  return status;
}

// A child silent this long on its pipe is taken to hang.
inline constexpr int kSilenceLimitMs = 60000;

// Writes one fixed-size message on the report pipe; a child that cannot
// report exits with status 4.
template <class Message>
void send_message(int fd, const Message& message) {
  if (::write(fd, &message, sizeof message) != static_cast<ssize_t>(sizeof message)) _exit(4);
}

enum class Received { kMessage, kEnd, kSilent };

template <class Message>
Received receive(int fd, Message& message) {
  pollfd watched{fd, POLLIN, 0};
  if (::poll(&watched, 1, kSilenceLimitMs) == 0) return Received::kSilent;
  const ssize_t got = ::read(fd, &message, sizeof message);
  return got == static_cast<ssize_t>(sizeof message) ? Received::kMessage : Received::kEnd;
}

inline std::string describe(int status) {
  if (WIFSIGNALED(status)) return "died of signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace resurgo::fault
