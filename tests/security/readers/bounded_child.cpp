#include "bounded_child.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>

#include "resurgo/errors.hpp"

namespace resurgo::security {

namespace {

// The child's exit codes.
enum : int { kExitRefused = 0, kExitAccepted = 10, kExitBadAlloc = 11, kExitOther = 12 };

std::uint64_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

void write_all(int fd, const std::string& text) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t written = ::write(fd, text.data() + done, text.size() - done);
    if (written <= 0) return;
    done += static_cast<std::size_t>(written);
  }
}

[[noreturn]] void child(int fd, std::uint64_t budget, const std::function<void()>& reader) {
  const rlim_t limit = mapped_bytes() + budget;
  const rlimit cap{limit, limit};
  if (::setrlimit(RLIMIT_AS, &cap) != 0) ::_exit(kExitOther);
  int code = kExitAccepted;
  std::string message;
  try {
    reader();
  } catch (const Error& error) {
    code = kExitRefused;
    message = error.what();
  } catch (const std::bad_alloc&) {
    code = kExitBadAlloc;
  } catch (const std::exception& error) {
    code = kExitOther;
    message = error.what();
  }
  write_all(fd, message);
  ::_exit(code);
}

std::string read_all(int fd) {
  std::string text;
  char piece[4096];
  for (ssize_t got; (got = ::read(fd, piece, sizeof piece)) > 0;) text.append(piece, static_cast<std::size_t>(got));
  return text;
}

}  // namespace

std::uint64_t reader_budget(std::uint64_t file_bytes) { return file_bytes + (4u << 20) + (8u << 20); }

ChildOutcome run_bounded(std::uint64_t budget, const std::function<void()>& reader) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], budget, reader);
  }
  ::close(fds[1]);
  ChildOutcome outcome;
  outcome.message = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    outcome.message = std::string("killed by signal ") + ::strsignal(WTERMSIG(status));
    return outcome;
  }
  switch (WEXITSTATUS(status)) {
    case kExitRefused: outcome.kind = ChildOutcome::Kind::kRefused; break;
    case kExitAccepted: outcome.kind = ChildOutcome::Kind::kAccepted; break;
    case kExitBadAlloc: outcome.kind = ChildOutcome::Kind::kBadAlloc; break;
    default: outcome.kind = ChildOutcome::Kind::kOtherException; break;
  }
  return outcome;
}

std::string describe(const ChildOutcome& outcome) {
  switch (outcome.kind) {
    case ChildOutcome::Kind::kRefused: return "refused: " + outcome.message;
    case ChildOutcome::Kind::kAccepted: return "accepted";
    case ChildOutcome::Kind::kBadAlloc: return "std::bad_alloc";
    case ChildOutcome::Kind::kOtherException: return "another exception: " + outcome.message;
    case ChildOutcome::Kind::kCrashed: return "crashed (" + outcome.message + ")";
  }
  return "?";
}

}  // namespace resurgo::security
