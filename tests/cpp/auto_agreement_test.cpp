// How the ranks of a job agree on automatic checkpoints (src/auto/agreement.h),
// with a communicator of threads standing in for MPI ranks.
#include <functional>
#include <string>
#include <vector>

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
    Agreement agreement(comm, every_loops, 10, "store 'agreement'");
    body(rank, agreement);
  });
}

// Two datasets as the mini-apps declare them (sizes differ between ranks).
DatasetTable declared(int rank, const std::vector<std::string>& names, std::vector<double>& memory) {
  DatasetTable table;
  memory.assign(64, 0);
  for (const std::string& name : names) {
    table.add(name, memory.data(), (rank + 1) * 8 * sizeof(double), {"float64", {rank + 1, 8}}, 0);
  }
  return table;
}

TEST(Agreement, EveryRankEntersTheRegionAtTheSameLoopWhenOneIsDue) {
  std::vector<std::vector<std::uint64_t>> due_loops(3);
  run_ranks(3, 4, [&](int rank, Agreement& agreement) {
    std::vector<double> memory;
    const DatasetTable datasets = declared(rank, {"u", "v"}, memory);
    for (std::uint64_t loop = 1; loop <= 20; ++loop) {
      const bool locally_due = rank == 1 && loop >= 10;  // one rank's timer fires
      if (agreement.due_at_loop(locally_due, {datasets, 42, loop, "smooth"})) due_loops[rank].push_back(loop);
    }
  });
  for (const auto& loops : due_loops) EXPECT_EQ(loops, (std::vector<std::uint64_t>{12, 16, 20}));
}

// Runs exchanges at loops 4 and 8 on 3 ranks, rank 2 with the datasets,
// loop sequence and loop name given, and returns each rank's error (empty: none).
std::vector<std::string> exchange_errors(const std::vector<std::string>& names_of_rank_2, std::uint64_t sequence_of_rank_2,
                                         std::string_view call_of_rank_2) {
  std::vector<std::string> errors(3);
  run_ranks(3, 4, [&](int rank, Agreement& agreement) {
    std::vector<double> memory;
    const bool odd = rank == 2;
    const DatasetTable datasets = declared(rank, odd ? names_of_rank_2 : std::vector<std::string>{"u", "v"}, memory);
    try {
      const std::string_view call = odd ? call_of_rank_2 : "smooth";
      agreement.due_at_loop(true, {datasets, odd ? sequence_of_rank_2 : 42, 4, call});
      agreement.due_at_loop(true, {datasets, odd ? sequence_of_rank_2 : 42, 8, call});
    } catch (const MismatchError& error) {
      errors[rank] = error.what();
    }
  });
  return errors;
}

TEST(Agreement, RanksThatDeclareOtherDatasetsAreNamedOnEveryRank) {
  const std::vector<std::string> errors = exchange_errors({"u", "w"}, 42, "smooth");
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("store 'agreement': at loop 4 ('smooth') the ranks declared other datasets"), std::string::npos)
        << error;
    EXPECT_NE(error.find("rank 2 declares dataset 1 as 'w' (float64, 2-D, halo 0) where rank 0 declares 'v'"),
              std::string::npos)
        << error;
    EXPECT_EQ(error.find("rank 1"), std::string::npos) << error;
    EXPECT_NE(error.find("no checkpoint was taken"), std::string::npos) << error;
  }
}

TEST(Agreement, ARankWithFewerDatasetsIsNamed) {
  const std::vector<std::string> errors = exchange_errors({"u"}, 42, "smooth");
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("rank 2 declares 1 datasets where rank 0 declares 2"), std::string::npos) << error;
  }
}

TEST(Agreement, RanksThatRanOtherLoopsAreNamedWithWhereTheyAre) {
  const std::vector<std::string> errors = exchange_errors({"u", "v"}, 43, "halo");
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("at loop 4 the ranks ran other loops since the start (rank 0 at 'smooth', "
                         "rank 2 at 'halo')"),
              std::string::npos)
        << error;
  }
}

TEST(Agreement, LoopsThatDivergeAfterAnExchangeAreReportedSinceIt) {
  std::vector<std::string> errors(2);
  run_ranks(2, 4, [&](int rank, Agreement& agreement) {
    std::vector<double> memory;
    const DatasetTable datasets = declared(rank, {"u"}, memory);
    try {
      agreement.due_at_loop(false, {datasets, 7, 4, "smooth"});
      agreement.due_at_loop(false, {datasets, rank == 1 ? 9u : 8u, 8, rank == 1 ? "extra" : "smooth"});
    } catch (const MismatchError& error) {
      errors[rank] = error.what();
    }
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("the ranks ran other loops since loop 4 (rank 0 at 'smooth', rank 1 at 'extra')"),
              std::string::npos)
        << error;
  }
}

TEST(Agreement, TheRanksFallBackToTheNewestVersionEveryOneHolds) {
  std::vector<long> agreed(3);
  run_ranks(3, 1, [&](int rank, Agreement& agreement) {
    const std::vector<std::vector<long>> held{{1, 2, 3, 5}, {1, 3, 5}, {2, 3, 4, 5}};
    agreed[rank] = agreement.newest_everywhere(held[rank], 5);
  });
  for (const long version : agreed) EXPECT_EQ(version, 3);
}

TEST(Agreement, NoVersionBelowWhenOneRankHoldsNone) {
  std::vector<long> agreed(2);
  run_ranks(2, 1, [&](int rank, Agreement& agreement) {
    agreed[rank] = agreement.newest_everywhere(rank == 0 ? std::vector<long>{1, 2} : std::vector<long>{2}, 2);
  });
  for (const long version : agreed) EXPECT_EQ(version, -1);
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
  Agreement agreement(comm, 8, 10, "store 'alone'");
  const DatasetTable datasets;
  EXPECT_TRUE(agreement.alone());
  EXPECT_TRUE(agreement.due_at_loop(true, {datasets, 1, 3, "x"}));  // not only at multiples of 8
  EXPECT_EQ(agreement.location("x", {}), "x");
}

}  // namespace
}  // namespace resurgo::autockpt
