// Children of the fault campaigns: a forked process with a pipe on which it
// reports to the driver, reaped into a wait status the summary can describe.
#pragma once

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

inline std::string describe(int status) {
  if (WIFSIGNALED(status)) return "died of signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace resurgo::fault
