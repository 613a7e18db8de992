// Fixed-size pool of worker threads running submitted tasks in FIFO order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace resurgo {

struct Config;

// Threads of a store's pipeline (pipeline.threads; 0 = min(2, cores)),
// counting the thread that hands them work.
int pipeline_thread_count(const Config& config);

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();  // finishes queued tasks, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::future<void> submit(std::function<void()> task);
  int size() const { return static_cast<int>(workers_.size()); }

  // Runs body(i) for i in [0, count) on the calling thread and on idle pool
  // workers; returns once every body has returned, without waiting for
  // helpers still queued behind other work. Rethrows the first exception
  // (the remaining bodies are skipped).
  void parallel_for(std::size_t count, const std::function<void(std::size_t)>& body);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace resurgo
