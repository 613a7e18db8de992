// How the ranks of a job agree on automatic checkpoints (src/auto/agreement.h),
// with a communicator of threads standing in for MPI ranks, its allgather
// with a deadline as MPI's (timed_thread_comm.h). The exchanges at loops
// run in both modes: blocking on the application's thread (MPI without
// MPI_THREAD_MULTIPLE) and posted to a thread, their answer collected at
// the next exchange (issue 31 part 1).
#include <chrono>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "auto/agreement.h"
#include "resurgo/errors.hpp"
#include "timed_thread_comm.h"

namespace resurgo::autockpt {
namespace {

// Runs `body(rank, agreement)` on `size` threads. `pipelined`: the
// communicator lets a thread call it; `timeout`: the deadline of each
// exchange, in seconds.
void run_ranks(int size, std::uint64_t every_loops, const std::function<void(int, Agreement&)>& body,
               bool pipelined = true, double timeout = 10) {
  testing::ThreadJob job(size);
  testing::GatherBoard board(size);
  testing::run_ranks(job, [&](int rank) {
    testing::TimedThreadComm comm(job, board, rank, pipelined);
    Agreement agreement(comm, every_loops, timeout, "store 'agreement'");
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

// The parameter: whether the exchanges at loops are posted to a thread.
class AgreementModes : public ::testing::TestWithParam<bool> {
 protected:
  bool pipelined() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Agreement, AgreementModes, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& mode) { return mode.param ? "Pipelined" : "Blocking"; });

// Rank 1's timer fires at loop 10 and stays due; rank 2 is due at loop 4
// only. Every rank gets the same answers at the same loops; pipelined, each
// answer comes one exchange later, and an exchange that answers "due"
// posts nothing (its checkpoint is the one due), so the next answer comes
// two exchanges after it.
TEST_P(AgreementModes, EveryRankEntersTheRegionAtTheSameLoopWhenOneIsDue) {
  std::vector<std::vector<std::uint64_t>> due_loops(3);
  run_ranks(
      3, 4,
      [&](int rank, Agreement& agreement) {
        EXPECT_EQ(agreement.pipelined(), pipelined());
        std::vector<double> memory;
        const DatasetTable datasets = declared(rank, {"u", "v"}, memory);
        for (std::uint64_t loop = 1; loop <= 24; ++loop) {
          const bool locally_due = (rank == 1 && loop >= 10) || (rank == 2 && loop == 4);
          if (agreement.due_at_loop(locally_due, {datasets, 42, loop, "smooth"})) due_loops[rank].push_back(loop);
        }
      },
      pipelined());
  const std::vector<std::uint64_t> expected =
      pipelined() ? std::vector<std::uint64_t>{8, 16, 24} : std::vector<std::uint64_t>{4, 12, 16, 20, 24};
  for (const auto& loops : due_loops) EXPECT_EQ(loops, expected);
}

// A location call collects the exchange in flight: a rank due there is not
// lost, and the answer does not wait for the next exchange.
TEST_P(AgreementModes, ALocationCallAnswersAtOnce) {
  std::vector<std::vector<bool>> answers(2);
  run_ranks(
      2, 4,
      [&](int rank, Agreement& agreement) {
        std::vector<double> memory;
        const DatasetTable datasets = declared(rank, {"u"}, memory);
        answers[rank].push_back(agreement.due_at_loop(rank == 1, {datasets, 42, 4, "smooth"}));
        answers[rank].push_back(agreement.due_now(false, {datasets, 43, 6, "fastfw"}));
        answers[rank].push_back(agreement.due_now(rank == 0, {datasets, 44, 7, "fastfw"}));
        answers[rank].push_back(agreement.due_at_loop(false, {datasets, 45, 8, "smooth"}));
      },
      pipelined());
  const std::vector<bool> expected{!pipelined(), pipelined(), true, false};
  for (const auto& rank_answers : answers) EXPECT_EQ(rank_answers, expected);
}

// Runs exchanges at loops 4, 8 and 12 on 3 ranks, rank 2 with the datasets,
// loop sequence and loop name given, and returns each rank's error (empty: none).
std::vector<std::string> exchange_errors(const std::vector<std::string>& names_of_rank_2, std::uint64_t sequence_of_rank_2,
                                         std::string_view call_of_rank_2, bool pipelined) {
  std::vector<std::string> errors(3);
  run_ranks(
      3, 4,
      [&](int rank, Agreement& agreement) {
        std::vector<double> memory;
        const bool odd = rank == 2;
        const DatasetTable datasets = declared(rank, odd ? names_of_rank_2 : std::vector<std::string>{"u", "v"}, memory);
        try {
          const std::string_view call = odd ? call_of_rank_2 : "smooth";
          for (const std::uint64_t loop : {4, 8, 12}) {
            agreement.due_at_loop(true, {datasets, odd ? sequence_of_rank_2 : 42, loop, call});
          }
        } catch (const MismatchError& error) {
          errors[rank] = error.what();
        }
      },
      pipelined);
  return errors;
}

TEST_P(AgreementModes, RanksThatDeclareOtherDatasetsAreNamedOnEveryRank) {
  const std::vector<std::string> errors = exchange_errors({"u", "w"}, 42, "smooth", pipelined());
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

TEST_P(AgreementModes, ARankWithFewerDatasetsIsNamed) {
  const std::vector<std::string> errors = exchange_errors({"u"}, 42, "smooth", pipelined());
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("rank 2 declares 1 datasets where rank 0 declares 2"), std::string::npos) << error;
  }
}

TEST_P(AgreementModes, RanksThatRanOtherLoopsAreNamedWithWhereTheyAre) {
  const std::vector<std::string> errors = exchange_errors({"u", "v"}, 43, "halo", pipelined());
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("at loop 4 the ranks ran other loops since the start (rank 0 at 'smooth', "
                         "rank 2 at 'halo')"),
              std::string::npos)
        << error;
  }
}

// Pipelined, the datasets a rank declares after an exchange was posted do
// not count in it: the message shows the declarations it compared.
TEST(Agreement, ADatasetDeclaredAfterAPostedExchangeIsNotInItsMessage) {
  std::vector<std::string> errors(2);
  run_ranks(2, 4, [&](int rank, Agreement& agreement) {
    std::vector<double> memory;
    DatasetTable datasets = declared(rank, {rank == 1 ? "w" : "u"}, memory);
    try {
      agreement.due_at_loop(false, {datasets, 7, 4, "smooth"});
      datasets.add("late", memory.data(), 8, {"float64", {1}}, 0);
      agreement.due_at_loop(false, {datasets, 7, 8, "smooth"});
    } catch (const MismatchError& error) {
      errors[rank] = error.what();
    }
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("at loop 4 ('smooth') the ranks declared other datasets: rank 1 declares dataset 0 as 'w'"),
              std::string::npos)
        << error;
    EXPECT_EQ(error.find("late"), std::string::npos) << error;
  }
}

TEST_P(AgreementModes, LoopsThatDivergeAfterAnExchangeAreReportedSinceIt) {
  std::vector<std::string> errors(2);
  run_ranks(
      2, 4,
      [&](int rank, Agreement& agreement) {
        std::vector<double> memory;
        const DatasetTable datasets = declared(rank, {"u"}, memory);
        const std::string_view call = rank == 1 ? "extra" : "smooth";
        try {
          agreement.due_at_loop(false, {datasets, 7, 4, "smooth"});
          agreement.due_at_loop(false, {datasets, rank == 1 ? 9u : 8u, 8, call});
          agreement.due_at_loop(false, {datasets, rank == 1 ? 11u : 10u, 12, call});
        } catch (const MismatchError& error) {
          errors[rank] = error.what();
        }
      },
      pipelined());
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("at loop 8 the ranks ran other loops since loop 4 (rank 0 at 'smooth', rank 1 at 'extra')"),
              std::string::npos)
        << error;
  }
}

// Rank 2 stops between the exchanges at loops 4 and 8 (it died or hangs):
// the others fail with an error naming it and the exchange it missed,
// pipelined at the next exchange, where they collect that one.
TEST_P(AgreementModes, ARankThatNeverReachesTheNextExchangeMakesTheOthersTimeOut) {
  std::vector<std::string> errors(3);
  std::vector<std::uint64_t> failed_at(3, 0);
  run_ranks(
      3, 4,
      [&](int rank, Agreement& agreement) {
        std::vector<double> memory;
        const DatasetTable datasets = declared(rank, {"u"}, memory);
        for (std::uint64_t loop = 1; loop <= (rank == 2 ? 7u : 16u); ++loop) {
          try {
            agreement.due_at_loop(false, {datasets, 42, loop, "smooth"});
          } catch (const StateError& error) {
            errors[rank] = error.what();
            failed_at[rank] = loop;
            return;
          }
        }
      },
      pipelined(), 0.3);
  for (const int rank : {0, 1}) {
    const std::string& error = errors[rank];
    EXPECT_NE(error.find("store 'agreement': the ranks' agreement at loop 8 ('smooth') failed: rank " +
                         std::to_string(rank) + ": rank(s) 2 did not make the same call within 0.3"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("no checkpoint is taken here: restart the job"), std::string::npos) << error;
    EXPECT_EQ(failed_at[rank], pipelined() ? 12u : 8u);
  }
  EXPECT_EQ(errors[2], "");
}

// Rank 1 sleeps between the exchanges at loops 4 and 8 and rank 0 goes no
// further than loop 8 before rank 1 woke (as a halo exchange would hold
// it): rank 0's agreement calls wait for rank 1 only when they block. The
// bound is half the sleep, far from the noise of a busy machine.
TEST_P(AgreementModes, ARankThatLagsWithinAnIntervalHoldsTheOthersOnlyWhenBlocking) {
  constexpr std::chrono::milliseconds kSleep{400};
  std::latch started(2);
  std::latch woke(1);
  std::chrono::duration<double> fast_rank_waited{0};
  run_ranks(
      2, 4,
      [&](int rank, Agreement& agreement) {
        std::vector<double> memory;
        const DatasetTable datasets = declared(rank, {"u"}, memory);
        started.arrive_and_wait();
        for (std::uint64_t loop = 1; loop <= 16; ++loop) {
          if (rank == 1 && loop == 6) {
            std::this_thread::sleep_for(kSleep);
            woke.count_down();
          }
          const auto begin = std::chrono::steady_clock::now();
          agreement.due_at_loop(false, {datasets, 42, loop, "smooth"});
          if (rank == 0 && loop <= 8) fast_rank_waited += std::chrono::steady_clock::now() - begin;
          if (rank == 0 && loop == 8) woke.wait();
        }
      },
      pipelined());
  if (pipelined()) {
    EXPECT_LT(fast_rank_waited, kSleep / 2);
  } else {
    EXPECT_GE(fast_rank_waited, kSleep / 2);
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
  EXPECT_FALSE(agreement.pipelined());  // no thread, no duplicate communicator
  EXPECT_TRUE(agreement.due_at_loop(true, {datasets, 1, 3, "x"}));  // not only at multiples of 8
  EXPECT_EQ(agreement.location("x", {}), "x");
}

}  // namespace
}  // namespace resurgo::autockpt
