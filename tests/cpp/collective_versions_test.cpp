// Versions of a job (issue 12, src/job/collective_versions.h): every rank's
// Store of one job, each on a thread with a communicator of threads
// (thread_job.h), so the two-phase commit, the agreement at checkpoint and
// at restart, and the fall-backs run in one process under the sanitizers.
// tests/mpi runs the same store over MPI under mpirun.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <numeric>

#include <gtest/gtest.h>

#include "format/manifest.h"
#include "format/file_names.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "job_levels.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using testing::ThreadComm;
using testing::ThreadJob;

class CollectiveVersionsTest : public ::testing::Test {
 protected:
  // Two ranks per node, three versions kept on each level.
  Config config() const {
    Config result = testing::job_levels(dir.path());
    result.local.keep = 3;
    result.persistent.keep = 3;
    return result;
  }
  std::string local_dir(int node) const { return dir.path() + "/node" + std::to_string(node) + "/job"; }
  std::string persistent_dir() const { return dir.path() + "/l4/job"; }

  // Every rank checkpoints `versions`, each rank's state holding the
  // version and its rank, and waits until each is durable on L4.
  // `threads`: whether the communicator may be called from the job's thread.
  void checkpoint_job(int ranks, const std::vector<int>& versions, bool threads = true) {
    ThreadJob job(ranks, 2);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(), std::make_shared<ThreadComm>(job, rank, threads));
      std::vector<int> state(1000);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      for (int version : versions) {
        std::iota(state.begin(), state.end(), version * 100000 + rank * 1000);
        store.checkpoint(version);
      }
      store.wait(kAllVersions, kL4);
      store.close();
    });
  }

  struct Restored {
    int version = -1;
    int first_value = -1;
    std::vector<std::string> skipped;
    std::string error;
  };
  // Every rank restarts from the newest version of the job.
  std::vector<Restored> restart_job(int ranks) {
    ThreadJob job(ranks, 2);
    std::vector<Restored> restored(static_cast<std::size_t>(ranks));
    testing::run_ranks(job, [&](int rank) {
      Restored& mine = restored[static_cast<std::size_t>(rank)];
      try {
        Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
        std::vector<int> state(1000, -1);
        store.protect(0, state.data(), state.size() * sizeof(int), "state");
        mine.version = store.restart();
        mine.first_value = state[0];
        mine.skipped = store.last_restart().skipped;
      } catch (const Error& error) {
        mine.error = error.what();
      }
    });
    return restored;
  }

  static std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
  }

  TempDir dir;
};

TEST_F(CollectiveVersionsTest, EveryRankRestoresItsOwnBytesOfTheNewestVersion) {
  checkpoint_job(4, {1, 2});
  for (const std::string& directory : {local_dir(0), local_dir(1), persistent_dir()}) {
    EXPECT_TRUE(fs::exists(directory + "/" + format::manifest_file_name(2))) << directory;
  }
  const std::vector<Restored> restored = restart_job(4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(restored[rank].error, "");
    EXPECT_EQ(restored[rank].version, 2);
    EXPECT_EQ(restored[rank].first_value, 200000 + rank * 1000);
  }
}

TEST_F(CollectiveVersionsTest, WithoutAJobThreadTheStepsRunInTheStoreCalls) {
  checkpoint_job(3, {1, 2, 3}, false);
  EXPECT_TRUE(fs::exists(persistent_dir() + "/" + format::manifest_file_name(3)));
  const std::vector<Restored> restored = restart_job(3);
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(restored[rank].first_value, 300000 + rank * 1000);
}

TEST_F(CollectiveVersionsTest, TheManifestListsEveryRanksFileAndItsChecksum) {
  checkpoint_job(3, {5});
  std::ifstream in(persistent_dir() + "/" + format::manifest_file_name(5));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const format::Manifest manifest = format::decode_manifest(text, "l4 manifest");
  EXPECT_EQ(manifest.version, 5);
  ASSERT_EQ(manifest.ranks, 3);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(manifest.files[rank].file, "v0000000005.r00000" + std::to_string(rank) + ".rsg");
    EXPECT_EQ(manifest.files[rank].node, rank / 2);
    EXPECT_EQ(manifest.files[rank].bytes, fs::file_size(persistent_dir() + "/" + manifest.files[rank].file));
    EXPECT_NE(manifest.files[rank].checksum, 0u);
  }
}

// checkpoint() only hands the version to the job: the ranks find out that
// they disagree off the application's path, and every rank's next call says so.
TEST_F(CollectiveVersionsTest, RanksNamingDifferentVersionsAllFailAtTheirNextCall) {
  ThreadJob job(3);
  std::vector<std::string> errors(3);
  std::vector<std::optional<int>> latest(3, 0);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    int value = rank;
    store.protect(0, &value, sizeof value, "value");
    store.checkpoint(rank == 2 ? 8 : 7);
    try {
      store.wait(kAllVersions, kL2);
    } catch (const InvalidArgumentError& error) {
      errors[rank] = error.what();
    }
    latest[rank] = store.latest();
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(errors[rank].find("rank 2: 8"), std::string::npos) << errors[rank];
    EXPECT_EQ(latest[rank], std::nullopt) << "neither version is a version of the job";
  }
}

TEST_F(CollectiveVersionsTest, AVersionOneRankCouldNotTakeFailsEveryRankAndTheJobGoesOn) {
  ThreadJob job(2);
  std::vector<std::string> errors(2);
  std::vector<int> restored(2, -1);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    int value = rank;
    if (rank == 0) store.protect(0, &value, sizeof value, "value");  // rank 1 forgot
    try {
      store.checkpoint(1);
      store.wait(kAllVersions, kL2);
    } catch (const Error& error) {
      errors[rank] = error.what();
    }
    if (rank == 1) store.protect(0, &value, sizeof value, "value");
    store.checkpoint(2);
    store.wait(2, kL4);
    restored[rank] = store.restart();
  });
  EXPECT_NE(errors[1].find("nothing is protected"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0].find("checkpoint 1 failed on rank(s) 1"), std::string::npos) << errors[0];
  EXPECT_EQ(restored, (std::vector<int>{2, 2}));
}

TEST_F(CollectiveVersionsTest, AVersionOneRankLostFallsBackOnEveryRank) {
  checkpoint_job(4, {1, 2});
  // Rank 3 lost version 2 everywhere (its node died mid-commit, say).
  fs::remove(local_dir(1) + "/v0000000002.r000003.rsg");
  fs::remove(persistent_dir() + "/v0000000002.r000003.rsg");
  const std::vector<Restored> restored = restart_job(4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(restored[rank].error, "");
    EXPECT_EQ(restored[rank].version, 1) << rank;
    EXPECT_EQ(restored[rank].first_value, 100000 + rank * 1000);
  }
}

TEST_F(CollectiveVersionsTest, AVersionWithoutManifestIsNotAVersionOfTheJob) {
  checkpoint_job(2, {1, 2});
  for (const std::string& directory : {local_dir(0), persistent_dir()}) {
    fs::remove(directory + "/" + format::manifest_file_name(2));
  }
  const std::vector<Restored> restored = restart_job(2);
  for (const Restored& mine : restored) {
    EXPECT_EQ(mine.version, 1);
    EXPECT_NE(joined(mine.skipped).find("version 2 (rank"), std::string::npos) << joined(mine.skipped);
    EXPECT_NE(joined(mine.skipped).find("no job manifest"), std::string::npos);
  }
}

TEST_F(CollectiveVersionsTest, ADamagedManifestIsSkippedAndSaysSo) {
  checkpoint_job(2, {1, 2});
  for (const std::string& directory : {local_dir(0), persistent_dir()}) {
    std::fstream file(directory + "/" + format::manifest_file_name(2), std::ios::in | std::ios::out);
    file.seekp(20);
    file.put('#');
  }
  const std::vector<Restored> restored = restart_job(2);
  for (const Restored& mine : restored) {
    EXPECT_EQ(mine.version, 1);
    EXPECT_NE(joined(mine.skipped).find("checksum does not match"), std::string::npos) << joined(mine.skipped);
  }
}

TEST_F(CollectiveVersionsTest, AFileOfAnotherJobIsNotRestored) {
  checkpoint_job(2, {1, 2});
  // Another job's rank 1 wrote its own version 2 over ours (same store name).
  const std::string ours = persistent_dir() + "/v0000000002.r000001.rsg";
  const fs::path elsewhere = fs::path(dir.path()) / "other";
  {
    Config other = config();
    other.local.path = (elsewhere / "l2").string();
    other.persistent.path = (elsewhere / "l4").string();
    ThreadJob job(2);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", other, std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state(1000, 7);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      store.checkpoint(2);
      store.wait(2, kL4);
    });
  }
  fs::copy_file(elsewhere / "l4/job/v0000000002.r000001.rsg", ours, fs::copy_options::overwrite_existing);
  fs::remove(local_dir(0) + "/v0000000002.r000001.rsg");
  const std::vector<Restored> restored = restart_job(2);
  for (const Restored& mine : restored) EXPECT_EQ(mine.version, 1);
  EXPECT_NE(joined(restored[1].skipped).find("files of another job"), std::string::npos) << joined(restored[1].skipped);
}

TEST_F(CollectiveVersionsTest, AJobOfAnotherSizeDoesNotRestoreTheVersion) {
  checkpoint_job(4, {1});
  const std::vector<Restored> restored = restart_job(2);
  for (const Restored& mine : restored) {
    EXPECT_EQ(mine.version, -1);
    EXPECT_NE(mine.error.find("written by 4 ranks): region 'state' is not declared as a block of a global array"),
              std::string::npos)
        << mine.error;
  }
}

// Ranks may protect different regions; a restart whose protected set does
// not fit the version on one rank fails on every rank, and says which.
TEST_F(CollectiveVersionsTest, ARegionSetThatDoesNotFitOnOneRankFailsEveryRank) {
  checkpoint_job(3, {1});
  ThreadJob job(3, 2);
  std::vector<std::string> errors(3);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    std::vector<int> state(1000, -1);
    std::vector<int> extra(10, -1);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    if (rank == 1) store.protect(1, extra.data(), extra.size() * sizeof(int), "extra");  // the version lacks it
    try {
      store.restart();
    } catch (const NotFoundError& error) {
      errors[rank] = error.what();
    }
  });
  EXPECT_NE(errors[1].find("region 'extra' is protected but the checkpoint does not hold it"), std::string::npos)
      << errors[1];
  for (int rank : {0, 2}) {
    EXPECT_NE(errors[rank].find("version 1: not restorable on every rank (another rank could not restore it)"),
              std::string::npos)
        << errors[rank];
  }
}

TEST_F(CollectiveVersionsTest, LatestAgreesOnTheNewestCompleteVersion) {
  checkpoint_job(2, {3, 4});
  fs::remove(local_dir(0) + "/v0000000004.r000000.rsg");
  fs::remove(persistent_dir() + "/v0000000004.r000000.rsg");
  ThreadJob job(2);
  std::vector<std::optional<int>> latest(2);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    latest[rank] = store.latest();
  });
  EXPECT_EQ(latest[0], 3);
  EXPECT_EQ(latest[1], 3);
}

}  // namespace
}  // namespace resurgo

namespace resurgo {
namespace {

// Restart on another rank count: a global array of kRows x kColumns
// float64, element (i, j) = i * 1000 + j, split by rows unevenly (rank r of
// n gets a share growing with r) and, for a second region, by columns.
constexpr std::int64_t kRows = 1000;
constexpr std::int64_t kColumns = 64;

double element(std::int64_t row, std::int64_t column) { return static_cast<double>(row * 1000 + column); }

// [first, last) of `extent` for rank `rank` of `ranks`, shares 1, 2, ..., n.
std::pair<std::int64_t, std::int64_t> uneven_share(int rank, int ranks, std::int64_t extent) {
  const std::int64_t total_weight = ranks * (ranks + 1) / 2;
  const auto edge = [&](int r) { return extent * (r * (r + 1) / 2) / total_weight; };
  return {edge(rank), edge(rank + 1)};
}

struct GlobalBlocks {
  std::vector<double> rows;     // rows [row_first, row_last) x all columns
  std::vector<double> columns;  // all rows x columns [column_first, column_last)
  std::pair<std::int64_t, std::int64_t> row_range;
  std::pair<std::int64_t, std::int64_t> column_range;

  GlobalBlocks(int rank, int ranks)
      : row_range(uneven_share(rank, ranks, kRows)), column_range(uneven_share(rank, ranks, kColumns)) {
    rows.assign(static_cast<std::size_t>((row_range.second - row_range.first) * kColumns), -1);
    columns.assign(static_cast<std::size_t>(kRows * (column_range.second - column_range.first)), -1);
  }
  std::int64_t row_count() const { return row_range.second - row_range.first; }
  std::int64_t column_count() const { return column_range.second - column_range.first; }

  void fill() {
    for (std::int64_t i = 0; i < row_count(); ++i) {
      for (std::int64_t j = 0; j < kColumns; ++j) rows[static_cast<std::size_t>(i * kColumns + j)] = element(row_range.first + i, j);
    }
    for (std::int64_t i = 0; i < kRows; ++i) {
      for (std::int64_t j = 0; j < column_count(); ++j) {
        columns[static_cast<std::size_t>(i * column_count() + j)] = element(i, column_range.first + j);
      }
    }
  }
  bool holds_the_global_values() const {
    GlobalBlocks expected = *this;
    expected.fill();
    return rows == expected.rows && columns == expected.columns;
  }
  void protect(Store& store) {
    store.protect(0, rows.data(), rows.size() * sizeof(double), "by-rows", ElementType{"float64", {row_count(), kColumns}},
                  GlobalBlock{{kRows, kColumns}, {row_range.first, 0}});
    store.protect(1, columns.data(), columns.size() * sizeof(double), "by-columns",
                  ElementType{"float64", {kRows, column_count()}}, GlobalBlock{{kRows, kColumns}, {0, column_range.first}});
  }
};

class RedistributionTest : public CollectiveVersionsTest {
 protected:
  Config small_chunks() const {
    Config result = config();
    result.pipeline.chunk_size = 64u << 10;
    return result;
  }
  void write(int ranks, int version) {
    ThreadJob job(ranks, 2);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", small_chunks(), std::make_shared<ThreadComm>(job, rank));
      GlobalBlocks blocks(rank, ranks);
      blocks.protect(store);
      blocks.fill();
      store.checkpoint(version);
      store.wait(version, kL4);
    });
  }
  // Restarts on `ranks`; every rank must restore `version` with the values of the global arrays.
  void restart_on(int ranks, int version) {
    ThreadJob job(ranks, 2);
    std::mutex mutex;
    testing::run_ranks(job, [&](int rank) {
      Store store("job", small_chunks(), std::make_shared<ThreadComm>(job, rank));
      GlobalBlocks blocks(rank, ranks);
      blocks.protect(store);
      const int restored = store.restart();
      const RestartReport report = store.last_restart();
      std::lock_guard lock(mutex);
      EXPECT_EQ(restored, version) << "rank " << rank;
      EXPECT_TRUE(blocks.holds_the_global_values()) << "rank " << rank;
      EXPECT_EQ(report.bytes, (blocks.rows.size() + blocks.columns.size()) * sizeof(double));
      EXPECT_GT(report.written_by_ranks, 0);
      // Rows come in one run per old block: at most two partial chunks each
      // beyond the bytes needed. Columns are strided: every chunk of the
      // overlapping old rows is read once (the cache keeps the last chunk).
      EXPECT_LE(report.bytes_read, blocks.rows.size() * sizeof(double) + 2 * report.written_by_ranks * (64u << 10) +
                                       kRows * kColumns * sizeof(double));
    });
  }
};

TEST_F(RedistributionTest, FourRanksRestartOnTwo) {
  write(4, 7);
  restart_on(2, 7);
}

TEST_F(RedistributionTest, TwoRanksRestartOnThree) {
  write(2, 3);
  restart_on(3, 3);
}

TEST_F(RedistributionTest, EightRanksRestartOnFiveWithUnevenBlocks) {
  write(8, 1);
  restart_on(5, 1);
}

TEST_F(RedistributionTest, TheNewJobCheckpointsAfterTheRestoredVersionAndRestartsItsOwn) {
  write(4, 7);
  ThreadJob job(2, 2);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", small_chunks(), std::make_shared<ThreadComm>(job, rank));
    GlobalBlocks blocks(rank, 2);
    blocks.protect(store);
    EXPECT_EQ(store.restart(), 7);
    EXPECT_THROW(store.checkpoint(7), InvalidArgumentError);  // not newer than the version restored
    store.checkpoint(8);
    store.wait(8, kL4);
    EXPECT_EQ(store.restart(), 8);
    EXPECT_EQ(store.last_restart().written_by_ranks, 0);
    EXPECT_TRUE(blocks.holds_the_global_values());
  });
}

TEST_F(RedistributionTest, ADamagedChunkOfAnOldRankFailsEveryNewRank) {
  write(2, 3);
  const std::string file = persistent_dir() + "/v0000000003.r000001.rsg";
  {
    std::fstream damaged(file, std::ios::in | std::ios::out | std::ios::binary);
    damaged.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    damaged.put('\x5a');
  }
  ThreadJob job(3, 2);
  std::vector<std::string> errors(3);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", small_chunks(), std::make_shared<ThreadComm>(job, rank));
    GlobalBlocks blocks(rank, 3);
    blocks.protect(store);
    try {
      store.restart();
    } catch (const NotFoundError& error) {
      errors[rank] = error.what();
    }
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("version 3: not restorable on every rank"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace resurgo
