// The automatic runtime in a job of threads standing in for MPI ranks
// (thread_job.h): when one rank alone asks for a checkpoint, every rank
// takes it before the same loop, whether the ranks' exchanges block the
// application's thread or are posted to a thread of their own and
// collected an exchange later (issue 31 part 1; src/auto/agreement.h).
// The restart bit for bit of such checkpoints runs under mpirun
// (tests/mpi, auto_tealeaf_mpi_*).
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "job_levels.h"
#include "resurgo/auto.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "thread_job.h"

namespace resurgo::autockpt {
namespace {

// The parameter: whether the communicator lets a thread call it.
class JobAgreementModes : public ::testing::TestWithParam<bool> {
 protected:
  TempDir dir;
};

INSTANTIATE_TEST_SUITE_P(AutoJob, JobAgreementModes, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& mode) { return mode.param ? "Pipelined" : "Blocking"; });

// A stencil step of three loops on a block of rows of its own size per
// rank; rank 1 alone triggers a checkpoint before loop 10 (and again
// before loop 40, for a second one).
TEST_P(JobAgreementModes, EveryRankCheckpointsBeforeTheSameLoopWhenOneRankAsks) {
  constexpr int kRanks = 3;
  testing::ThreadJob job(kRanks);
  std::vector<std::vector<CheckpointReport>> made(kRanks);
  testing::run_ranks(job, [&](int rank) {
    Store store("auto_job", testing::job_levels(dir.path()),
                std::make_shared<testing::ThreadComm>(job, rank, GetParam()));
    Options options;
    options.agreement_loops = 4;
    Runtime rt(store, options);
    const std::int64_t rows = rank + 2;
    std::vector<double> u(static_cast<std::size_t>(rows) * 16, rank), w(u.size(), 0);
    const int u_id = rt.dataset("u", u.data(), u.size() * sizeof(double), {"float64", {rows, 16}});
    const int w_id = rt.dataset("w", w.data(), w.size() * sizeof(double), {"float64", {rows, 16}});
    for (int step = 0; step < 20; ++step) {
      if (rank == 1 && (rt.loop_index() == 9 || rt.loop_index() == 39)) rt.trigger();
      rt.loop("smooth", {{u_id, Access::kRead}, {w_id, Access::kWrite}});
      rt.loop("copy_back", {{w_id, Access::kRead}, {u_id, Access::kWrite}});
      rt.loop("norm", {{u_id, Access::kRead}});
      const auto last = rt.last_checkpoint();
      if (last && (made[rank].empty() || made[rank].back().version != last->version)) made[rank].push_back(*last);
    }
    store.close();
  });
  ASSERT_EQ(made[0].size(), 2u);
  for (int rank = 1; rank < kRanks; ++rank) {
    ASSERT_EQ(made[rank].size(), made[0].size()) << "rank " << rank;
    for (std::size_t i = 0; i < made[0].size(); ++i) {
      EXPECT_EQ(made[rank][i].version, made[0][i].version) << "rank " << rank;
      EXPECT_EQ(made[rank][i].loop_index, made[0][i].loop_index) << "rank " << rank;
      EXPECT_EQ(made[rank][i].location, made[0][i].location) << "rank " << rank;
    }
  }
  // Not before the exchange that carried the request: loop 12 blocking,
  // its answer at loop 16 pipelined.
  EXPECT_GE(made[0][0].loop_index, GetParam() ? 16u : 12u);
  EXPECT_GE(made[0][1].loop_index, GetParam() ? 44u : 40u);
}

}  // namespace
}  // namespace resurgo::autockpt
