#include "matrix/progress_thread.h"

#include "matrix/backoff.h"

namespace resurgo {

ProgressThread::ProgressThread(std::function<bool()> poll) : poll_(std::move(poll)), thread_([this] { run(); }) {}

ProgressThread::~ProgressThread() { stop(); }

void ProgressThread::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void ProgressThread::rethrow_failure() {
  std::exception_ptr failure;
  {
    const std::lock_guard<std::mutex> lock(failure_mutex_);
    failure.swap(failure_);
  }
  if (failure) std::rethrow_exception(failure);
}

void ProgressThread::run() {
  Backoff backoff;
  try {
    while (!stopping_) {
      if (poll_()) {
        backoff.reset();
      } else {
        backoff.pause();
      }
    }
  } catch (...) {
    const std::lock_guard<std::mutex> lock(failure_mutex_);
    failure_ = std::current_exception();
  }
}

}  // namespace resurgo
