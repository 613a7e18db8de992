// How the ranks of a job agree on automatic checkpoints (src/auto/agreement.h),
// with a communicator of threads standing in for MPI ranks.
#include <functional>

#include <gtest/gtest.h>

#include "auto/agreement.h"
#include "resurgo/errors.hpp"
#include "thread_job.h"

namespace resurgo::autockpt {
namespace {

// Runs `body(rank, agreement)` on `size` threads.
void run_ranks(int size, std::uint64_t every_loops, const std::function<void(int, Agreement&)>& body) {
  testing::ThreadJob job(size);
  testing::run_ranks(job, [&](int rank) {
    testing::ThreadComm comm(job, rank);
    Agreement agreement(comm, every_loops);
    body(rank, agreement);
  });
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
  testing::ThreadJob job(1);
  testing::ThreadComm comm(job, 0);
  Agreement agreement(comm, 8);
  EXPECT_TRUE(agreement.alone());
  EXPECT_TRUE(agreement.due_at_loop(3, true));  // not only at multiples of 8
  EXPECT_EQ(agreement.location("x", {}), "x");
}

}  // namespace
}  // namespace resurgo::autockpt
