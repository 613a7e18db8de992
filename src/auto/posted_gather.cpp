#include "auto/posted_gather.h"

#include <stdexcept>
#include <utility>

#include "base/thread_priority.h"

namespace resurgo::autockpt {

PostedGather::PostedGather(Comm& comm, double timeout_seconds)
    : comm_(comm.duplicate()), timeout_seconds_(timeout_seconds), thread_([this] { run(); }) {}

PostedGather::~PostedGather() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();  // after the gather posted last: the other ranks wait for this rank's value
}

void PostedGather::post(long value) {
  if (pending_) throw std::logic_error("PostedGather::post: the previous gather was not collected");
  {
    std::lock_guard lock(mutex_);
    request_ = value;
    done_ = false;
  }
  pending_ = true;
  changed_.notify_all();
}

std::vector<long> PostedGather::collect() {
  if (!pending_) throw std::logic_error("PostedGather::collect: nothing was posted");
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_; });
  pending_ = false;
  done_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return std::move(values_);
}

// At the priority of the store's job thread (base/thread_priority.h): the
// gather waits for the other ranks by polling, on cores the application
// leaves idle rather than taking turns with it on a contested one.
void PostedGather::run() {
  lower_this_thread_priority();
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || request_.has_value(); });
    if (!request_) return;  // stopping, with every posted gather run
    const long value = *std::exchange(request_, std::nullopt);
    lock.unlock();
    std::vector<long> values;
    std::exception_ptr error;
    try {
      values = comm_->allgather(value, timeout_seconds_);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    values_ = std::move(values);
    error_ = error;
    done_ = true;
    changed_.notify_all();
  }
}

}  // namespace resurgo::autockpt
