#include "auto/termination_flush.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT};
constexpr std::size_t kSignalCount = sizeof kSignals / sizeof kSignals[0];
constexpr unsigned char kStop = 0;  // not a signal number: the watcher ends

std::atomic<int> signal_pipe{-1};
std::atomic<pid_t> watching_process{-1};
struct sigaction previous[kSignalCount];

// Async-signal-safe: sigaction.
void restore_handler(int signal) {
  for (std::size_t i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] == signal) ::sigaction(signal, &previous[i], nullptr);
  }
}

extern "C" void on_termination_signal(int signal) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal);
  const int fd = signal_pipe.load(std::memory_order_relaxed);
  if (::getpid() != watching_process.load(std::memory_order_relaxed)) {
    // A forked child: the pipe leads to the parent's watcher, which would
    // flush and end the parent. The signal gets its earlier disposition,
    // delivered once this handler returns (it is blocked until then).
    restore_handler(signal);
    ::raise(signal);
  } else if (fd >= 0) {
    // Non-blocking: a full pipe already holds the byte that wakes the watcher.
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

void restore_handlers() {
  for (const int signal : kSignals) restore_handler(signal);
}

void close_pipe(int (&fds)[2]) {
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace

TerminationFlush::TerminationFlush(std::function<void(int)> flush) : flush_(std::move(flush)), owner_(::getpid()) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) {
    throw StorageError(std::string("cannot create the pipe of the termination flush: ") + std::strerror(errno));
  }
  // Only the write end: the watcher blocks in read() until a byte comes.
  if (::fcntl(pipe_[1], F_SETFL, O_NONBLOCK) != 0) {
    const int error = errno;
    close_pipe(pipe_);
    throw StorageError(std::string("cannot make the termination flush's pipe non-blocking: ") + std::strerror(error));
  }
  int expected = -1;
  if (!signal_pipe.compare_exchange_strong(expected, pipe_[1])) {
    close_pipe(pipe_);
    throw StateError("another automatic runtime already flushes on termination in this process; "
                     "set flush_on_termination = false on one of them");
  }
  watching_process.store(owner_);
  struct sigaction action {};
  action.sa_handler = on_termination_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < kSignalCount; ++i) ::sigaction(kSignals[i], &action, &previous[i]);
  watcher_ = std::thread([this] { watch(); });
}

TerminationFlush::~TerminationFlush() {
  restore_handlers();
  if (::getpid() == owner_) {
    // Dropped only when the pipe is full of signals, one of which ends the watcher just as well.
    [[maybe_unused]] const ssize_t written = ::write(pipe_[1], &kStop, 1);
    watcher_.join();
  } else {
    // A forked child: the watcher is the parent's thread (joining it would
    // wait for ever) and a byte written here would stop it.
    watcher_.detach();
  }
  signal_pipe.store(-1);
  close_pipe(pipe_);
}

void TerminationFlush::watch() {
  for (;;) {
    unsigned char byte = kStop;
    const ssize_t got = ::read(pipe_[0], &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got != 1 || byte == kStop) return;
    flush_(byte);
    restore_handlers();
    ::raise(byte);
    return;  // a handler the application installed may have let the process live
  }
}

}  // namespace resurgo::autockpt
