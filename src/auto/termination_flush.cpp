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
constexpr unsigned char kStop = 0;  // not a signal number: the watcher ends

std::atomic<int> signal_pipe{-1};
struct sigaction previous[sizeof kSignals / sizeof kSignals[0]];

extern "C" void on_termination_signal(int signal) {
  const int saved_errno = errno;
  const auto byte = static_cast<unsigned char>(signal);
  const int fd = signal_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

void restore_handlers() {
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) ::sigaction(kSignals[i], &previous[i], nullptr);
}

}  // namespace

TerminationFlush::TerminationFlush(std::function<void(int)> flush) : flush_(std::move(flush)) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0) {
    throw StorageError(std::string("cannot create the pipe of the termination flush: ") + std::strerror(errno));
  }
  int expected = -1;
  if (!signal_pipe.compare_exchange_strong(expected, pipe_[1])) {
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    throw StateError("another automatic runtime already flushes on termination in this process; "
                     "set flush_on_termination = false on one of them");
  }
  struct sigaction action {};
  action.sa_handler = on_termination_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) ::sigaction(kSignals[i], &action, &previous[i]);
  watcher_ = std::thread([this] { watch(); });
}

TerminationFlush::~TerminationFlush() {
  restore_handlers();
  [[maybe_unused]] const ssize_t written = ::write(pipe_[1], &kStop, 1);
  watcher_.join();
  signal_pipe.store(-1);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
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
