// A communicator of threads (thread_job.h) whose allgather has a deadline,
// as MPI's has (Comm::allgather with a timeout): a rank that does not call
// within it makes the others throw StateError naming it. For the tests of
// a rank that dies or stalls at a collective; ThreadComm's own allgather
// waits for ever.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "resurgo/errors.hpp"
#include "thread_job.h"

namespace resurgo::testing {

// The values of each allgather of a job, by channel and call number.
class GatherBoard {
 public:
  explicit GatherBoard(int size) : size_(size) {}

  std::vector<long> gather(int channel, long call, int rank, long value, double timeout_seconds) {
    std::unique_lock lock(mutex_);
    std::vector<std::optional<long>>& round = rounds_[{channel, call}];
    round.resize(static_cast<std::size_t>(size_));
    round[static_cast<std::size_t>(rank)] = value;
    changed_.notify_all();
    const auto complete = [&] { return std::all_of(round.begin(), round.end(), [](const auto& v) { return v.has_value(); }); };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                  std::chrono::duration<double>(timeout_seconds));
    if (!changed_.wait_until(lock, deadline, complete)) {
      std::string missing;
      for (int r = 0; r < size_; ++r) {
        if (!round[static_cast<std::size_t>(r)]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      throw StateError("rank " + std::to_string(rank) + ": rank(s) " + missing + " did not make the same call within " +
                       std::to_string(timeout_seconds) + " s");
    }
    std::vector<long> values;
    for (const std::optional<long>& v : round) values.push_back(*v);
    return values;
  }

 private:
  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, long>, std::vector<std::optional<long>>> rounds_;
};

// A ThreadComm whose allgather (and its duplicates') goes through `board`.
class TimedThreadComm final : public Comm {
 public:
  TimedThreadComm(ThreadJob& job, GatherBoard& board, int rank, bool threads_may_call = true, int channel = 0)
      : inner_(job, rank, threads_may_call, channel), job_(job), board_(board), channel_(channel) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int node() const override { return inner_.node(); }
  bool threads_may_call() const override { return inner_.threads_may_call(); }
  long allreduce_min(long value) override { return inner_.allreduce_min(value); }
  void barrier() override { inner_.barrier(); }
  void send(int to_rank, const void* data, std::size_t bytes) override { inner_.send(to_rank, data, bytes); }
  void receive(int from_rank, void* data, std::size_t bytes) override { inner_.receive(from_rank, data, bytes); }
  void exchange(int to_rank, const void* out, std::size_t out_bytes, int from_rank, void* in,
                std::size_t in_bytes) override {
    inner_.exchange(to_rank, out, out_bytes, from_rank, in, in_bytes);
  }
  std::unique_ptr<Comm> duplicate() override {
    return std::make_unique<TimedThreadComm>(job_, board_, rank(), threads_may_call(), channel_ * 16 + ++duplicates_);
  }
  std::vector<long> allgather(long value, double timeout_seconds) override {
    return board_.gather(channel_, ++calls_, rank(), value, timeout_seconds);
  }

 private:
  ThreadComm inner_;
  ThreadJob& job_;
  GatherBoard& board_;
  int channel_;
  int duplicates_ = 0;
  long calls_ = 0;
};

}  // namespace resurgo::testing
