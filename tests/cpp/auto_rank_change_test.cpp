// Automatic checkpoints of datasets declared as blocks of global arrays
// (issue 31 part 3): the check that the ranks' blocks tile each global
// array, the record that lets a job of another rank count restore a
// version, the declarations refused, and a job of one restoring its own
// global-block checkpoint. The restart on another rank count itself runs
// under mpirun (tests/mpi/auto_rank_change.cmake).
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "auto/block_cover.h"
#include "auto/checkpoint_record.h"
#include "auto/dataset_table.h"
#include "resurgo/auto.h"
#include "resurgo/auto.hpp"
#include "resurgo/errors.hpp"
#include "levels_in_temp_dir.h"
#include "thread_job.h"

namespace resurgo::autockpt {
namespace {

std::vector<Block> rows_of(const std::vector<std::pair<std::int64_t, std::int64_t>>& first_and_count,
                           std::int64_t cols) {
  std::vector<Block> blocks;
  for (const auto& [first, count] : first_and_count) blocks.push_back({{first, 0}, {count, cols}});
  return blocks;
}

TEST(BlockCover, UnevenRowBlocksTileTheArray) {
  EXPECT_EQ(cover_problem({10, 4}, rows_of({{0, 4}, {4, 3}, {7, 3}}, 4)), "");
}

TEST(BlockCover, OverlapNamesBothRanksAndTheCommonBox) {
  EXPECT_EQ(cover_problem({10, 4}, rows_of({{0, 4}, {4, 3}, {6, 4}}, 4)),
            "rank 1's block [4, 7) x [0, 4) and rank 2's block [6, 10) x [0, 4) overlap in [6, 7) x [0, 4)");
}

TEST(BlockCover, GapNamesAnElementInNoBlock) {
  EXPECT_EQ(cover_problem({10, 4}, rows_of({{0, 4}, {5, 5}}, 4)),
            "the 2 ranks' blocks hold 36 of its 40 elements, leaving a gap: element (4, 0) is in no rank's block");
}

TEST(BlockCover, GapInsideATwoDimensionalDecomposition) {
  // Four 2 x 2 quarters of a 4 x 4 array, the lower right one missing its last column.
  const std::vector<Block> blocks{{{0, 0}, {2, 2}}, {{0, 2}, {2, 2}}, {{2, 0}, {2, 2}}, {{2, 2}, {2, 1}}};
  EXPECT_EQ(cover_problem({4, 4}, blocks),
            "the 4 ranks' blocks hold 14 of its 16 elements, leaving a gap: element (2, 3) is in no rank's block");
}

// Every rank declares u as its rows of a 9 x 2 array; `wrong_rank` shifts
// its block down by one row (an overlap above, a gap below).
std::vector<std::string> problems_of_three_ranks(int wrong_rank) {
  testing::ThreadJob job(3);
  std::vector<std::string> problems(3);
  testing::run_ranks(job, [&](int rank) {
    testing::ThreadComm comm(job, rank);
    Agreement agreement(comm, 1, 5.0, "store 'test'");
    std::vector<double> u(6);
    DatasetTable table;
    const std::int64_t first = 3 * rank + (rank == wrong_rank ? 1 : 0);
    table.add("u", u.data(), u.size() * sizeof(double), ElementType{"float64", {3, 2}}, 0,
              GlobalBlock{{9, 2}, {std::min<std::int64_t>(first, 6), 0}});
    problems[static_cast<std::size_t>(rank)] = blocks_problem(table, agreement);
  });
  return problems;
}

TEST(BlocksProblem, EveryRankGetsTheSameVerdict) {
  EXPECT_EQ(problems_of_three_ranks(-1), std::vector<std::string>(3, ""));
  const std::vector<std::string> problems = problems_of_three_ranks(0);
  EXPECT_EQ(problems[0],
            "dataset 'u' (global shape 9x2): rank 0's block [1, 4) x [0, 2) and rank 1's block [3, 6) x [0, 2) "
            "overlap in [3, 4) x [0, 2)");
  EXPECT_EQ(problems[1], problems[0]);
  EXPECT_EQ(problems[2], problems[0]);
}

TEST(CheckpointRecord, GlobalPartRoundTrips) {
  CheckpointRecord record;
  record.kind = CheckpointKind::kFastForward;
  record.has_payload = true;
  record.loop_index = 42;
  record.init_end = 3;
  record.sequence_hash = 0x1234;
  record.location = "fastfw";
  record.ranks = 4;
  record.global = true;
  record.query_log_bytes = 4096;
  record.payload_bytes = 24;
  record.saved = {"u", "density"};
  const std::optional<CheckpointRecord> back = decode(encode(record), "version 1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ranks, 4u);
  EXPECT_EQ(back->query_log_bytes, 4096u);
  EXPECT_EQ(back->payload_bytes, 24u);
  EXPECT_EQ(back->saved, record.saved);
  EXPECT_EQ(back->location, "fastfw");
  EXPECT_EQ(back->loop_index, 42u);
}

TEST(CheckpointRecord, PerRankRecordKeepsItsOldEncoding) {
  CheckpointRecord record;
  record.location = "stencil";
  const std::vector<std::byte> encoded = encode(record);
  EXPECT_EQ(encoded.size(), 8u + 3u + 4u * 8u + record.location.size());  // magic, flags, four numbers, the name
  const std::optional<CheckpointRecord> back = decode(encoded, "version 1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ranks, 0u);
  EXPECT_TRUE(back->saved.empty());
}

TEST(CheckpointRecord, PerRankVersionKeepsItsRankCount) {
  CheckpointRecord record;
  record.ranks = 3;
  record.saved = {"ignored: only a global version lists its datasets"};
  const std::optional<CheckpointRecord> back = decode(encode(record), "version 1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->ranks, 3u);
  EXPECT_FALSE(back->global);
  EXPECT_TRUE(back->saved.empty());
}

TEST(CheckpointRecord, TruncatedGlobalPartIsCorrupt) {
  CheckpointRecord record;
  record.ranks = 2;
  record.global = true;
  record.saved = {"u"};
  std::vector<std::byte> encoded = encode(record);
  encoded.resize(encoded.size() - 1);
  EXPECT_THROW(decode(encoded, "version 1"), CorruptionError);
}

TEST(DatasetTable, RefusesBlocksItCannotMap) {
  std::vector<double> u(16);
  DatasetTable table;
  const std::size_t bytes = u.size() * sizeof(double);
  try {
    table.add("u", u.data(), bytes, ElementType{"float64", {4, 4}}, 1, GlobalBlock{{8, 4}, {0, 0}});
    FAIL() << "a halo with a block was accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("dataset 'u' as a block of a global array: a dataset with a halo"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(table.add("v", u.data(), bytes, ElementType{"", {4, 4}}, 0, GlobalBlock{{8, 4}, {0, 0}}),
               InvalidArgumentError);
  try {
    table.add("w", u.data(), bytes, ElementType{"float64", {4, 4}}, 0, GlobalBlock{{8, 4}, {6, 0}});
    FAIL() << "a block outside the global array was accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("on axis 0 the block [6, 10) does not lie inside [0, 8)"),
              std::string::npos)
        << error.what();
  }
  table.add("x", u.data(), bytes, ElementType{"float64", {4, 4}}, 0, GlobalBlock{{8, 4}, {4, 0}});
  EXPECT_TRUE(table.all_global());
  EXPECT_EQ(table.declarations(), std::vector<std::string>{"'x' (float64, 2-D, halo 0, block of a global 8x4)"});
}

class AutoCApiGlobal : public LevelsInTempDirTest {};

TEST_F(AutoCApiGlobal, RefusesMissingBlockArguments) {
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c_global", &store), RSG_OK) << rsg_last_error();
  rsg_auto* rt = nullptr;
  ASSERT_EQ(rsg_auto_attach(store, nullptr, &rt), RSG_OK) << rsg_last_error();
  double u[8] = {};
  const long long global_shape[1] = {16}, offset[1] = {8}, shape[1] = {8};
  int id = -1;
  EXPECT_EQ(rsg_auto_dataset_global(rt, "u", u, sizeof u, "float64", 1, global_shape, nullptr, shape, &id),
            RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("global_shape, offset and shape not NULL"), std::string::npos);
  EXPECT_EQ(rsg_auto_dataset_global(rt, "u", u, sizeof u, nullptr, 1, global_shape, offset, shape, &id), RSG_EINVAL);
  ASSERT_EQ(rsg_auto_dataset_global(rt, "u", u, sizeof u, "float64", 1, global_shape, offset, shape, &id), RSG_OK)
      << rsg_last_error();
  EXPECT_EQ(id, 0);
  EXPECT_EQ(rsg_auto_detach(rt), RSG_OK);
  EXPECT_EQ(rsg_close(store), RSG_OK);
}

// A job of threads: each rank holds its rows of a 12 x 4 global array u
// (and v), declared as global blocks. A step writes v from u and u from v,
// row by row (no neighbour: any decomposition gives the same bits), and
// queries a value every rank computes alike, or, with `rank_queries`, one
// that differs between ranks.
class ThreadJobApp {
 public:
  static constexpr std::int64_t kRows = 12, kCols = 4;

  // `global`: u and v declared as blocks of the global array, else as each rank's own.
  ThreadJobApp(const std::string& dir, int ranks, bool global = true) : dir_(dir), ranks_(ranks), global_(global) {}

  Config config() const {
    Config c;
    c.local.path = dir_ + "/node{node}";
    c.persistent.path = dir_ + "/l4";
    c.persistent.every = 1;
    return c;
  }

  // Runs steps 1..steps (stopping after step `stop_after` once a
  // checkpoint is on L4, when > 0); returns every rank's final rows in
  // rank order, and each rank's error (empty when none).
  std::vector<double> run(int steps, int checkpoint_step, int stop_after, bool rank_queries = false) {
    testing::ThreadJob job(ranks_, 2);
    std::vector<std::vector<double>> rows(static_cast<std::size_t>(ranks_));
    errors.assign(static_cast<std::size_t>(ranks_), "");
    restored_by.assign(static_cast<std::size_t>(ranks_), -1);
    testing::run_ranks(job, [&](int rank) {
      try {
        Store store("app", config(), std::make_shared<testing::ThreadComm>(job, rank));
        Options options;
        options.agreement_loops = 1;
        Runtime runtime(store, options);
        const std::int64_t mine = kRows / ranks_ + (rank < kRows % ranks_ ? 1 : 0);
        const std::int64_t first = rank * (kRows / ranks_) + std::min<std::int64_t>(rank, kRows % ranks_);
        std::vector<double> u(static_cast<std::size_t>(mine * kCols)), v(u.size());
        const ElementType type{"float64", {mine, kCols}};
        const GlobalBlock block = global_ ? GlobalBlock{{kRows, kCols}, {first, 0}} : GlobalBlock{};
        const int u_id = runtime.dataset("u", u.data(), u.size() * sizeof(double), type, block);
        const int v_id = runtime.dataset("v", v.data(), v.size() * sizeof(double), type, block);
        if (runtime.loop("init", {{u_id, Access::kWrite}})) {
          for (std::size_t k = 0; k < u.size(); ++k) u[k] = static_cast<double>(first * kCols) + static_cast<double>(k);
        }
        runtime.initphase_done();
        double scale = 0.5;
        for (int step = 1; step <= steps; ++step) {
          if (stop_after > 0 && step > stop_after) {
            store.wait(kAllVersions, kL4);
            return;
          }
          if (step == checkpoint_step && !runtime.restoring()) runtime.trigger();
          if (runtime.loop("scale", {{u_id, Access::kRead}, {v_id, Access::kWrite}})) {
            for (std::size_t k = 0; k < u.size(); ++k) v[k] = u[k] * scale + 1.0;
          }
          if (runtime.loop("copy", {{v_id, Access::kRead}, {u_id, Access::kWrite}})) u = v;
          scale = runtime.query(rank_queries ? scale + rank : scale * 1.0625);
        }
        if (const auto restore = runtime.last_restore()) restored_by[static_cast<std::size_t>(rank)] = restore->ranks;
        rows[static_cast<std::size_t>(rank)] = u;
      } catch (const Error& error) {
        errors[static_cast<std::size_t>(rank)] = error.what();
      }
    });
    std::vector<double> all;
    for (const std::vector<double>& mine : rows) all.insert(all.end(), mine.begin(), mine.end());
    return all;
  }

  std::vector<std::string> errors;
  std::vector<int> restored_by;  // the rank count that wrote the version each rank restored

 private:
  std::string dir_;
  int ranks_;
  bool global_;
};

TEST(AutoRankChange, ThreadJobOfTwoResumesOnThreeBitForBit) {
  TempDir uninterrupted, stopped;
  const std::vector<double> expected = ThreadJobApp(uninterrupted.path(), 1).run(8, 0, 0);
  ASSERT_EQ(expected.size(), static_cast<std::size_t>(ThreadJobApp::kRows * ThreadJobApp::kCols));
  ThreadJobApp two(stopped.path(), 2);
  two.run(8, 3, 5);
  EXPECT_EQ(two.errors, std::vector<std::string>(2, ""));
  ThreadJobApp three(stopped.path(), 3);
  const std::vector<double> resumed = three.run(8, 3, 0);
  EXPECT_EQ(three.errors, std::vector<std::string>(3, ""));
  EXPECT_EQ(three.restored_by, std::vector<int>(3, 2));
  ASSERT_EQ(resumed.size(), expected.size());
  EXPECT_EQ(std::memcmp(resumed.data(), expected.data(), expected.size() * sizeof(double)), 0);
}

TEST(AutoRankChange, PerRankVersionIsRefusedOnAnotherRankCount) {
  TempDir dir;
  ThreadJobApp(dir.path(), 2, /*global=*/false).run(8, 3, 5);
  ThreadJobApp three(dir.path(), 3, /*global=*/false);
  three.run(8, 3, 0);
  for (const std::string& error : three.errors) {
    EXPECT_NE(error.find("it was written by 2 ranks whose datasets were not all declared as blocks of global arrays, "
                         "so it restarts only on 2 ranks, not on 3"),
              std::string::npos)
        << error;
  }
}

TEST(AutoRankChange, RanksThatQueryOtherValuesAreRefusedBeforeWriting) {
  TempDir dir;
  ThreadJobApp two(dir.path(), 2);
  two.run(4, 2, 0, /*rank_queries=*/true);
  for (const std::string& error : two.errors) {
    EXPECT_NE(error.find("the ranks' query logs or payloads differ"), std::string::npos) << error;
    EXPECT_NE(error.find("nothing was written"), std::string::npos) << error;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/l4/app"));
}

}  // namespace
}  // namespace resurgo::autockpt
