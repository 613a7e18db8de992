#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <utility>

#include "resurgo/config.hpp"

namespace resurgo {

int pipeline_thread_count(const Config& config) {
  if (config.pipeline.threads > 0) return config.pipeline.threads;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 2u));
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

std::future<void> ThreadPool::submit(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> result = packaged.get_future();
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(packaged));
  }
  ready_.notify_one();
  return result;
}

void ThreadPool::work() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

// Work not worth a wake-up (one unit, few bytes, no workers) runs as a
// plain loop on the caller: no shared state, no lock per body.
void ThreadPool::parallel_for(std::size_t count, std::uint64_t bytes,
                              const std::function<void(std::size_t)>& body) {
  const std::size_t shared_units = bytes > kCallerOnlyBytes && count > 0 ? count - 1 : 0;
  const std::size_t helpers = std::min<std::size_t>(workers_.size(), shared_units);
  if (helpers > 0) {
    share(count, helpers, body);
    return;
  }
  for (std::size_t i = 0; i < count; ++i) body(i);
}

// Helpers are queued on the pool, but the caller never waits for one that
// has not started: it claims indices itself, then waits only for bodies in
// progress. A helper that starts late finds nothing left and returns without
// touching the caller's frame (the shared state outlives it).
void ThreadPool::share(std::size_t count, std::size_t helpers, const std::function<void(std::size_t)>& body) {
  struct Shared {
    std::atomic<std::size_t> next{0};
    std::size_t count = 0;
    const std::function<void(std::size_t)>* body = nullptr;
    std::mutex mutex;
    std::condition_variable finished;
    std::size_t done = 0;  // claimed indices whose body has returned or been skipped
    std::exception_ptr first_error;
  };
  auto shared = std::make_shared<Shared>();
  shared->count = count;
  shared->body = &body;
  const auto drain = [](const std::shared_ptr<Shared>& state) {
    for (std::size_t i = state->next++; i < state->count; i = state->next++) {
      bool skip = false;
      {
        std::lock_guard lock(state->mutex);
        skip = static_cast<bool>(state->first_error);
      }
      if (!skip) {
        try {
          (*state->body)(i);
        } catch (...) {
          std::lock_guard lock(state->mutex);
          if (!state->first_error) state->first_error = std::current_exception();
        }
      }
      std::lock_guard lock(state->mutex);
      if (++state->done == state->count) state->finished.notify_all();
    }
  };
  for (std::size_t i = 0; i < helpers; ++i) submit([shared, drain] { drain(shared); });
  drain(shared);
  std::unique_lock lock(shared->mutex);
  shared->finished.wait(lock, [&] { return shared->done == count; });
  // The caller takes the exception out of the shared state, which a late
  // helper may be the last to release: the exception is then owned, read
  // and destroyed by this thread alone.
  const std::exception_ptr error = std::exchange(shared->first_error, nullptr);
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

}  // namespace resurgo
