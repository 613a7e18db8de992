// How the ranks of a job agree on automatic checkpoints (src/auto/agreement.h),
// with a communicator of threads standing in for MPI ranks.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "auto/agreement.h"
#include "resurgo/errors.hpp"

namespace resurgo::autockpt {
namespace {

// The collectives of `size` ranks, each a thread holding a RankComm.
class ThreadJob {
 public:
  explicit ThreadJob(int size) : size_(size) {}
  int size() const { return size_; }

  long allreduce_min(long value) {
    std::unique_lock lock(mutex_);
    const long generation = generation_;
    smallest_ = arrived_ == 0 ? value : std::min(smallest_, value);
    if (++arrived_ == size_) {
      result_ = smallest_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
    return result_;
  }

 private:
  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long generation_ = 0;
  long smallest_ = 0;
  long result_ = 0;
};

class RankComm : public Comm {
 public:
  RankComm(ThreadJob& job, int rank) : job_(job), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return job_.size(); }
  long allreduce_min(long value) override { return job_.allreduce_min(value); }
  void barrier() override { job_.allreduce_min(0); }
  void send(int, const void*, std::size_t) override { ADD_FAILURE() << "agreement sends nothing point to point"; }
  void receive(int, void*, std::size_t) override { ADD_FAILURE() << "agreement receives nothing point to point"; }

 private:
  ThreadJob& job_;
  int rank_;
};

// Runs `body(rank, agreement)` on `size` threads.
void run_ranks(int size, std::uint64_t every_loops, const std::function<void(int, Agreement&)>& body) {
  ThreadJob job(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      RankComm comm(job, rank);
      Agreement agreement(comm, every_loops);
      body(rank, agreement);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST(Agreement, EveryRankEntersTheRegionAtTheSameLoopWhenOneIsDue) {
  std::vector<std::vector<std::uint64_t>> due_loops(3);
  run_ranks(3, 4, [&](int rank, Agreement& agreement) {
    for (std::uint64_t loop = 1; loop <= 20; ++loop) {
      const bool locally_due = rank == 1 && loop >= 10;  // one rank's timer fires
      if (agreement.due_at_loop(loop, locally_due)) due_loops[rank].push_back(loop);
    }
  });
  for (const auto& loops : due_loops) EXPECT_EQ(loops, (std::vector<std::uint64_t>{12, 16, 20}));
}

TEST(Agreement, EveryRankTakesRankZerosLocation) {
  std::vector<std::optional<std::string>> chosen(3);
  run_ranks(3, 1, [&](int rank, Agreement& agreement) {
    const std::vector<std::string> loops{"halo", "smooth", "copy_back"};
    // Each rank's own statistics would choose differently.
    const std::optional<std::string> mine = rank == 0 ? "smooth" : rank == 1 ? "halo" : "copy_back";
    chosen[rank] = agreement.location(mine, loops);
  });
  for (const auto& location : chosen) EXPECT_EQ(location, "smooth");
}

TEST(Agreement, NoRankChoosesWhenRankZeroHasNoCandidate) {
  std::vector<std::optional<std::string>> chosen(2, "unset");
  run_ranks(2, 1, [&](int rank, Agreement& agreement) {
    chosen[rank] = agreement.location(rank == 0 ? std::nullopt : std::optional<std::string>("halo"), {"halo"});
  });
  for (const auto& location : chosen) EXPECT_FALSE(location);
}

TEST(Agreement, ARankThatNeverRanTheChosenLoopFails) {
  std::vector<bool> failed(2, false);
  run_ranks(2, 1, [&](int rank, Agreement& agreement) {
    try {
      agreement.location("halo", rank == 0 ? std::vector<std::string>{"halo"} : std::vector<std::string>{"other"});
    } catch (const StateError&) {
      failed[rank] = true;
    }
  });
  EXPECT_FALSE(failed[0]);
  EXPECT_TRUE(failed[1]);
}

TEST(Agreement, TheRanksRestoreTheNewestVersionEveryOneHolds) {
  std::vector<long> agreed(3);
  run_ranks(3, 1, [&](int rank, Agreement& agreement) { agreed[rank] = agreement.smallest(rank == 2 ? 6 : 7); });
  for (const long version : agreed) EXPECT_EQ(version, 6);
}

TEST(Agreement, AJobOfOneNeverCallsTheCommunicator) {
  ThreadJob job(1);
  RankComm comm(job, 0);
  Agreement agreement(comm, 8);
  EXPECT_TRUE(agreement.alone());
  EXPECT_TRUE(agreement.due_at_loop(3, true));  // not only at multiples of 8
  EXPECT_EQ(agreement.location("x", {}), "x");
}

}  // namespace
}  // namespace resurgo::autockpt
