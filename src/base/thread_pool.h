// Fixed-size pool of worker threads running submitted tasks in FIFO order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <limits>
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
  // (the remaining bodies are skipped). `bytes`: what the bodies read or
  // write together; up to kCallerOnlyBytes, the caller runs them all and
  // wakes no worker (see there).
  void parallel_for(std::size_t count, std::uint64_t bytes, const std::function<void(std::size_t)>& body);

  // Work of up to this many bytes is not shared. On two cores the woken
  // worker took the caller's CPU at the wake-up, 44 us per save or load of
  // an adjoint run on the loaded 2-core VM (an upper bound:
  // bench/results/adjoint_small_offcpu.md), more than sharing a copy of
  // 1 MiB (about 22 us alone: small_checkpoints_python_call.md) can save.
  // The effect: bench/results/small_checkpoints_calls.md as of commit 3c83e74. The threshold is
  // for work at the speed of memory (copies, checksums). 1 MiB until a
  // restore from memory of 2 and 4 MiB was found faster on the caller alone
  // (bench/results/caller_only_threshold.md, back to back: 66 -> 53 us and
  // 136 -> 107 us); checkpoints, 8 and 16 MiB and the L2 route were alike
  // either way within the run's spread.
  static constexpr std::uint64_t kCallerOnlyBytes = std::uint64_t{4} << 20;
  // `bytes` for slower work (compression, file reads): shared whatever its
  // size, as all work was before the threshold.
  static constexpr std::uint64_t kAlwaysShared = std::numeric_limits<std::uint64_t>::max();

 private:
  void work();
  // parallel_for's bodies shared with `helpers` workers.
  void share(std::size_t count, std::size_t helpers, const std::function<void(std::size_t)>& body);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace resurgo
