// latest() and restart() agree (issue 28, items 2 and 8; job/restorable.h):
// latest() is the version restart(kLatest) restores as far as headers,
// indexes and job manifests tell, and what restart(kLatest) could not
// restore no longer blocks the next checkpoints, alone and in a job of
// threads standing in for MPI ranks (thread_job.h). tests/mpi runs the
// rank's death and the restart on another rank count under mpirun.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "format/file_names.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "job_levels.h"
#include "job_run.h"
#include "thread_job.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using testing::ThreadComm;
using testing::ThreadJob;

std::vector<double> field(std::size_t size, int version) { return std::vector<double>(size, version + 0.5); }
// Fills `u` in place: the protected pointer stays.
void set(std::vector<double>& u, int version) { std::fill(u.begin(), u.end(), version + 0.5); }

void damage_data(const std::string& path) { flip_bit(path, fs::file_size(path) / 2); }
void damage_footer(const std::string& path) { fs::resize_file(path, fs::file_size(path) - 10); }

// ------------------------------------------------------------ one process

class SoloAgreementTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"}, {"persistent.every", "0"},
                                               {"local.keep", "0"}, {"log.level", "off"}};
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::string l2(int version) const { return dir.path() + "/l2/s/" + format::container_file_name(version, 0); }
  void write(const std::vector<int>& versions, const Config& with) {
    Store store("s", with);
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version : versions) {
      set(u, version);
      store.checkpoint(version);
    }
    store.close();
  }

  TempDir dir;
  std::vector<double> u = std::vector<double>(4096);
};

TEST_F(SoloAgreementTest, LatestSkipsAVersionWhoseFooterIsDamaged) {
  write({1, 2, 3}, config());
  damage_footer(l2(3));
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(store.latest(), 2);
  EXPECT_EQ(store.restart(), 2);
}

// latest() reads no chunk: restart finds the damage, falls back, says why,
// and the version's number can be taken again.
TEST_F(SoloAgreementTest, ADamagedChunkIsFoundByRestartWhichSaysWhy) {
  write({1, 2, 3}, config());
  damage_data(l2(3));
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(store.latest(), 3);
  EXPECT_EQ(store.restart(), 2);
  ASSERT_FALSE(store.last_restart().skipped.empty());
  EXPECT_NE(store.last_restart().skipped[0].find("version 3"), std::string::npos) << store.last_restart().skipped[0];
  EXPECT_EQ(store.latest(), 2);
  EXPECT_NO_THROW(store.checkpoint(3));
}

// Versions 2, 3 and 4 are deltas on 1: 2 writes `u`, 3 and 4 write `w`,
// so that restoring 4 reads `u` from 2. A damaged base breaks every chain
// above it.
class SoloChainTest : public SoloAgreementTest {
 protected:
  Config delta() const { return config({{"capture.mode", "delta"}, {"track.method", "hash"}}); }
  void protect(Store& store) {
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.protect(1, w.data(), w.size() * sizeof(double), "w");
  }
  void write_chain() {
    Store store("s", delta());
    protect(store);
    set(u, 1);
    set(w, 1);
    store.checkpoint(1);
    for (int version : {2, 3, 4}) {
      set(version == 2 ? u : w, version);
      store.checkpoint(version);
    }
    store.close();
  }

  std::vector<double> w = std::vector<double>(4096);
};

TEST_F(SoloChainTest, LatestSkipsAChainWhoseBaseIsDamaged) {
  write_chain();
  damage_footer(l2(2));
  Store store("s", delta());
  protect(store);
  EXPECT_EQ(store.latest(), 1);
  EXPECT_EQ(store.restart(), 1);
  EXPECT_EQ(u, field(u.size(), 1));
}

// latest() reads no chunk: restart finds the damaged base and falls back;
// latest() then agrees (the intact deltas above the base stay, unusable).
TEST_F(SoloChainTest, LatestAgreesWithRestartOnceItFellBackPastABrokenChain) {
  write_chain();
  damage_data(l2(2));
  Store store("s", delta());
  protect(store);
  EXPECT_EQ(store.latest(), 4);
  EXPECT_EQ(store.restart(), 1);
  EXPECT_EQ(u, field(u.size(), 1));
  EXPECT_EQ(store.latest(), 1);
  EXPECT_TRUE(fs::exists(l2(2) + format::kDamagedSuffix));
  EXPECT_TRUE(fs::exists(l2(4)));
}

// Starting from scratch would fail too (versions must increase): latest()
// says why instead of answering none; restart sets the damaged ones aside.
TEST_F(SoloAgreementTest, AStoreWhoseEveryVersionIsDamagedMakesLatestSayWhy) {
  write({1, 2}, config());
  damage_footer(l2(1));
  damage_footer(l2(2));
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  try {
    store.latest();
    ADD_FAILURE() << "latest() answered";
  } catch (const StateError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("latest on store 's': it holds versions, but none"), std::string::npos) << message;
    EXPECT_NE(message.find("version 2: "), std::string::npos) << message;
    EXPECT_NE(message.find("version 1: "), std::string::npos) << message;
  }
  EXPECT_THROW(store.restart(), CorruptionError);
  EXPECT_EQ(store.latest(), std::nullopt);
  store.close();
  Store again("s", config());
  again.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(again.latest(), std::nullopt);
  EXPECT_NO_THROW(again.checkpoint(1));
}

// A process killed (SIGKILL) while it writes a version: the next run restarts
// the newest complete one and checkpoints the versions after it.
TEST_F(SoloAgreementTest, AProcessKilledMidWriteDoesNotBlockTheNextRun) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    std::vector<double> big(8u << 20);  // 64 MiB: each version takes a while to write
    Store store("s", config());
    store.protect(0, big.data(), big.size() * sizeof(double), "u");
    for (int version = 1;; ++version) {
      store.checkpoint(version);
      if (version == 2) {
        store.wait(2, kL2);
        const char byte = 1;
        if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
      }
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  std::vector<double> big(8u << 20);
  Store store("s", config());
  store.protect(0, big.data(), big.size() * sizeof(double), "u");
  const std::optional<int> latest = store.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_GE(*latest, 2);
  const int restored = store.restart();
  EXPECT_EQ(restored, *latest);
  EXPECT_NO_THROW(store.checkpoint(restored + 1));
  store.wait(restored + 1, kL2);
  EXPECT_EQ(store.latest(), restored + 1);
}

// ------------------------------------------------------ a job of threads

class JobAgreementTest : public ::testing::Test {
 protected:
  // Two ranks per node.
  Config config() const { return testing::job_levels(dir.path()); }
  std::string local(int rank, int version) const {
    return dir.path() + "/node" + std::to_string(rank / 2) + "/job/" + format::container_file_name(version, rank);
  }
  std::string persistent(int rank, int version) const {
    return dir.path() + "/l4/job/" + format::container_file_name(version, rank);
  }
  std::vector<std::string> manifests(int version) const {
    return {dir.path() + "/node0/job/" + format::manifest_file_name(version),
            dir.path() + "/l4/job/" + format::manifest_file_name(version)};
  }
  // Every rank's state holds the version and its rank; filled in place
  // (the protected pointer stays).
  static int value_of(int version, int rank) { return version * 1000 + rank; }

  // Two ranks checkpoint `versions`, durable on L4.
  void write(const std::vector<int>& versions) {
    ThreadJob job(2, 2);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state(1000);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      for (int version : versions) {
        std::fill(state.begin(), state.end(), value_of(version, rank));
        store.checkpoint(version);
      }
      store.wait(kAllVersions, kL4);
    });
  }

  // A new job of two ranks: latest(), restart(), then `next` checkpointed
  // and restarted again; per rank, what each step gave (job_run.h).
  using Run = testing::JobRun;
  std::vector<Run> continue_job(const std::vector<int>& next) {
    ThreadJob job(2, 2);
    std::vector<Run> runs(2);
    testing::run_ranks(job, [&](int rank) {
      Run& run = runs[static_cast<std::size_t>(rank)];
      Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state(1000, -1);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      run.attempt([&] { run.latest = store.latest(); });
      run.attempt([&] { run.restored = store.restart(); });
      for (int version : next) {
        std::fill(state.begin(), state.end(), value_of(version, rank));
        run.attempt([&] { store.checkpoint(version); });
      }
      run.attempt([&] { store.wait(kAllVersions, kL4); });
      std::fill(state.begin(), state.end(), -1);
      run.attempt([&] { run.restarted_again = store.restart(); });
      run.bytes_right = state == std::vector<int>(state.size(), value_of(run.restarted_again, rank));
    });
    return runs;
  }

  TempDir dir;
};

// The run: rank 1 died at version 13, after rank 0 had written 13
// and 14, which the job never committed (no manifest).
TEST_F(JobAgreementTest, FilesOfADeadRunDoNotBlockTheNextCheckpoints) {
  write({11, 12, 13, 14});
  for (int version : {13, 14}) {
    for (const std::string& manifest : manifests(version)) fs::remove(manifest);
    fs::remove(local(1, version));
    fs::remove(persistent(1, version));
  }
  for (const Run& run : continue_job({13, 14})) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.latest, 12);
    EXPECT_EQ(run.restored, 12);
    EXPECT_EQ(run.restarted_again, 14);
    EXPECT_TRUE(run.bytes_right);
  }
}

// Rank 1's version 3 is damaged everywhere: the job restarts version 2,
// sets version 3 aside on every rank and writes it again.
TEST_F(JobAgreementTest, AVersionOneRankCannotRestoreIsSetAsideOnEveryRank) {
  write({1, 2, 3});
  damage_data(local(1, 3));
  damage_data(persistent(1, 3));
  const std::vector<Run> runs = continue_job({3});
  for (const Run& run : runs) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.latest, 3);  // latest() reads no chunk
    EXPECT_EQ(run.restored, 2);
    EXPECT_EQ(run.restarted_again, 3);
    EXPECT_TRUE(run.bytes_right);
  }
  EXPECT_TRUE(fs::exists(local(0, 3) + format::kDamagedSuffix));
}

TEST_F(JobAgreementTest, LatestSkipsAVersionWhoseFooterIsDamagedOnOneRank) {
  write({1, 2, 3});
  damage_footer(local(1, 3));
  damage_footer(persistent(1, 3));
  for (const Run& run : continue_job({})) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.latest, 2);
    EXPECT_EQ(run.restored, 2);
  }
}

// ------------------------------------------ restart on another rank count

// A global array of 4000 int32, split evenly by rank.
class OtherRankCountTest : public JobAgreementTest {
 protected:
  static constexpr std::int64_t kElements = 4000;

  struct Block {
    std::vector<std::int32_t> values;
    std::int64_t first = 0;

    Block(int rank, int ranks) : values(static_cast<std::size_t>(kElements / ranks), -1), first(rank * (kElements / ranks)) {}
    void fill() {
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(first + static_cast<std::int64_t>(i));
    }
    void protect(Store& store) {
      store.protect(0, values.data(), values.size() * sizeof(std::int32_t), "field",
                    ElementType{"int32", {static_cast<std::int64_t>(values.size())}}, GlobalBlock{{kElements}, {first}});
    }
  };

  void write_global(int ranks, int version) {
    ThreadJob job(ranks, 2);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
      Block block(rank, ranks);
      block.fill();
      block.protect(store);
      store.checkpoint(version);
      store.wait(version, kL4);
    });
  }
};

TEST_F(OtherRankCountTest, LatestIsTheVersionRestartRedistributes) {
  write_global(2, 5);
  ThreadJob job(4, 2);
  std::mutex mutex;
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    Block block(rank, 4);
    block.protect(store);
    const std::optional<int> latest = store.latest();
    const int restored = store.restart();
    Block expected(rank, 4);
    expected.fill();
    std::lock_guard lock(mutex);
    EXPECT_EQ(latest, 5) << "rank " << rank;
    EXPECT_EQ(restored, 5) << "rank " << rank;
    EXPECT_EQ(block.values, expected.values) << "rank " << rank;
  });
}

// A region of each rank alone cannot be redistributed: latest() says why,
// on every rank, as restart() does, instead of answering none (starting
// from scratch would fail: versions must increase).
TEST_F(OtherRankCountTest, LatestSaysWhyAVersionCannotBeRedistributed) {
  write_global(2, 5);
  ThreadJob job(4, 2);
  std::vector<std::string> latest_errors(4);
  std::vector<std::string> restart_errors(4);
  testing::run_ranks(job, [&](int rank) {
    Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
    Block block(rank, 4);
    block.protect(store);
    int step = 0;
    store.protect(1, &step, sizeof step, "step");
    try {
      store.latest();
    } catch (const StateError& error) {
      latest_errors[static_cast<std::size_t>(rank)] = error.what();
    }
    try {
      store.restart();
    } catch (const NotFoundError& error) {
      restart_errors[static_cast<std::size_t>(rank)] = error.what();
    }
  });
  const std::string why = "version 5 (written by 2 ranks): region 'step' is not declared as a block of a global array";
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(latest_errors[rank].find("latest on store 'job': no version that every rank"), std::string::npos)
        << latest_errors[rank];
    EXPECT_NE(latest_errors[rank].find(why), std::string::npos) << latest_errors[rank];
    EXPECT_NE(restart_errors[rank].find(why), std::string::npos) << restart_errors[rank];
  }
}

}  // namespace
}  // namespace resurgo
