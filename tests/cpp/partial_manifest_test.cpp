// A job killed between two nodes' manifest writes (src/job/collective_versions.cpp,
// commit_manifest: rank 0 sends the manifest to the other nodes' writers
// before it commits its own node's copy) leaves a version whose manifest is
// on some nodes only. The job never committed it: the next run's latest()
// and restart() go to the version before it (none when there is none) as
// after a kill before any manifest, instead of failing, and the next
// checkpoints take its number again. Two ranks, one per node, over a job of
// threads (thread_job.h); tests/mpi/auto_restart.cmake kills real ranks.
#include <filesystem>
#include <functional>
#include <optional>

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

constexpr int kRanks = 2;
constexpr int kRanksPerNode = 1;

class PartialManifestTest : public ::testing::Test {
 protected:
  Config config() const { return testing::job_levels(dir.path()); }
  std::string node_dir(int node) const { return dir.path() + "/node" + std::to_string(node) + "/job"; }
  static int value_of(int version, int rank) { return version * 1000 + rank; }

  // Every rank opens the store, protects its state and runs `body`, which
  // must make the same calls on every rank (the job stays in step).
  void run_job(const std::function<void(int rank, Store& store, std::vector<int>& state)>& body) {
    ThreadJob job(kRanks, kRanksPerNode);
    testing::run_ranks(job, [&](int rank) {
      Store store("job", config(), std::make_shared<ThreadComm>(job, rank));
      std::vector<int> state(1000, -1);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      body(rank, store, state);
    });
  }
  void write(const std::vector<int>& versions) {
    run_job([&](int rank, Store& store, std::vector<int>& state) {
      for (int version : versions) {
        std::fill(state.begin(), state.end(), value_of(version, rank));
        store.checkpoint(version);
      }
      store.wait(kAllVersions, kL4);
    });
  }
  // The kill: node 1 committed `version`'s manifest, node 0 (rank 0's,
  // written after the others) and L4 (written after L2) did not.
  void interrupt_commit(int version) {
    const std::string manifest = format::manifest_file_name(version);
    ASSERT_TRUE(fs::exists(node_dir(1) + "/" + manifest));
    ASSERT_TRUE(fs::remove(node_dir(0) + "/" + manifest));
    ASSERT_TRUE(fs::remove(dir.path() + "/l4/job/" + manifest));
  }
  bool anything_set_aside() const {
    for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
      if (entry.path().string().ends_with(format::kDamagedSuffix)) return true;
    }
    return false;
  }

  using Run = testing::JobRun;  // what each rank's calls gave

  // latest(), then restart() when `restorable`, then `next` checkpointed,
  // durable, and restarted.
  std::vector<Run> continue_job(bool restorable, int next) {
    std::vector<Run> runs(kRanks);
    run_job([&](int rank, Store& store, std::vector<int>& state) {
      Run& run = runs[static_cast<std::size_t>(rank)];
      run.attempt([&] { run.latest = store.latest(); });
      if (restorable) run.attempt([&] { run.restored = store.restart(); });
      std::fill(state.begin(), state.end(), value_of(next, rank));
      run.attempt([&] { store.checkpoint(next); });
      run.attempt([&] { store.wait(kAllVersions, kL4); });
      std::fill(state.begin(), state.end(), -1);
      run.attempt([&] { run.restarted_again = store.restart(); });
      run.bytes_right = state == std::vector<int>(state.size(), value_of(next, rank));
    });
    return runs;
  }

  TempDir dir;
};

TEST_F(PartialManifestTest, TheJobRestartsTheVersionBeforeAndWritesTheInterruptedOneAgain) {
  write({1, 2});
  interrupt_commit(2);
  for (const Run& run : continue_job(true, 2)) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.latest, 1);
    EXPECT_EQ(run.restored, 1);
    EXPECT_EQ(run.restarted_again, 2);
    EXPECT_TRUE(run.bytes_right);
  }
  EXPECT_FALSE(anything_set_aside()) << "the interrupted version's files are not damaged: removed, not set aside";
}

// The job's first version interrupted: latest() answers none, as after a
// kill before any manifest, and restart() finds nothing to restore. The
// program then starts from scratch above the numbers its ranks hold, as the
// automatic runtime does (a store's versions must increase: its files of
// version 0 are still there, restart cleared nothing).
TEST_F(PartialManifestTest, AnInterruptedFirstVersionLeavesTheJobWithoutVersions) {
  write({0});
  interrupt_commit(0);
  std::vector<std::string> restart_errors(kRanks);
  run_job([&](int rank, Store& store, std::vector<int>&) {
    try {
      store.restart();
    } catch (const NotFoundError& error) {
      restart_errors[static_cast<std::size_t>(rank)] = error.what();
    }
  });
  for (const std::string& error : restart_errors) {
    EXPECT_NE(error.find("no version that every rank of the job can restore"), std::string::npos) << error;
  }
  for (const Run& run : continue_job(false, 1)) {
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.latest, std::nullopt);
    EXPECT_EQ(run.restarted_again, 1);
    EXPECT_TRUE(run.bytes_right);
  }
}

}  // namespace
}  // namespace resurgo
