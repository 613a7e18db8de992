// A job of threads standing in for the ranks of an MPI job in tests: each
// thread holds a ThreadComm (resurgo/comm.hpp) over one shared ThreadJob,
// with collectives and point-to-point messages, so the job-level logic runs
// in one process, under the sanitizers, without a launcher.
#pragma once

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "resurgo/comm.hpp"

namespace resurgo::testing {

class ThreadJob {
 public:
  // `ranks_per_node`: node = rank / ranks_per_node.
  explicit ThreadJob(int size, int ranks_per_node = 1) : size_(size), ranks_per_node_(ranks_per_node) {}
  int size() const { return size_; }
  int node_of(int rank) const { return rank / ranks_per_node_; }

  long allreduce_min(int channel, long value) {
    std::unique_lock lock(mutex_);
    Reduction& reduction = reductions_[channel];
    const long generation = reduction.generation;
    reduction.smallest = reduction.arrived == 0 ? value : std::min(reduction.smallest, value);
    if (++reduction.arrived == size_) {
      reduction.result = reduction.smallest;
      reduction.arrived = 0;
      ++reduction.generation;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return reduction.generation != generation; });
    }
    return reduction.result;
  }

  void send(int channel, int from, int to, const void* data, std::size_t bytes) {
    const auto* begin = static_cast<const std::byte*>(data);
    std::lock_guard lock(mutex_);
    mailboxes_[{channel, from, to}].emplace_back(begin, begin + bytes);
    changed_.notify_all();
  }

  void receive(int channel, int from, int to, void* data, std::size_t bytes) {
    std::unique_lock lock(mutex_);
    std::deque<std::vector<std::byte>>& box = mailboxes_[{channel, from, to}];
    changed_.wait(lock, [&] { return !box.empty(); });
    std::vector<std::byte> message = std::move(box.front());
    box.pop_front();
    if (message.size() != bytes) throw std::logic_error("thread job: message of another size than the receive");
    if (bytes > 0) std::memcpy(data, message.data(), bytes);
  }

 private:
  struct Reduction {
    int arrived = 0;
    long generation = 0;
    long smallest = 0;
    long result = 0;
  };
  const int size_;
  const int ranks_per_node_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, Reduction> reductions_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<std::byte>>> mailboxes_;
};

class ThreadComm final : public Comm {
 public:
  // `threads_may_call` false stands for MPI without MPI_THREAD_MULTIPLE.
  ThreadComm(ThreadJob& job, int rank, bool threads_may_call = true, int channel = 0)
      : job_(job), rank_(rank), threads_may_call_(threads_may_call), channel_(channel) {}
  int rank() const override { return rank_; }
  int size() const override { return job_.size(); }
  int node() const override { return job_.node_of(rank_); }
  bool threads_may_call() const override { return threads_may_call_; }
  long allreduce_min(long value) override { return job_.allreduce_min(channel_, value); }
  void barrier() override { job_.allreduce_min(channel_, 0); }
  void send(int to_rank, const void* data, std::size_t bytes) override {
    job_.send(channel_, rank_, to_rank, data, bytes);
  }
  void receive(int from_rank, void* data, std::size_t bytes) override {
    job_.receive(channel_, from_rank, rank_, data, bytes);
  }
  // Sends never wait here (mailboxes), so sending first cannot deadlock.
  void exchange(int to_rank, const void* out, std::size_t out_bytes, int from_rank, void* in,
                std::size_t in_bytes) override {
    send(to_rank, out, out_bytes);
    receive(from_rank, in, in_bytes);
  }
  // Every rank duplicates in the same order, so the n-th duplicate of each
  // rank shares one channel.
  std::unique_ptr<Comm> duplicate() override {
    return std::make_unique<ThreadComm>(job_, rank_, threads_may_call_, channel_ * 16 + ++duplicates_);
  }

 private:
  ThreadJob& job_;
  int rank_;
  bool threads_may_call_;
  int channel_;
  int duplicates_ = 0;
};

// Runs `body(rank)` on `size` threads of one job and joins them.
inline void run_ranks(ThreadJob& job, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < job.size(); ++rank) threads.emplace_back([&, rank] { body(rank); });
  for (std::thread& thread : threads) thread.join();
}

}  // namespace resurgo::testing
