// fsync failure semantics. When fsync (fdatasync) fails, Linux may already
// have dropped the dirty pages, marking them clean: a second fsync of the
// same file then succeeds although the data never reached the disk
// ("fsyncgate", PostgreSQL 2018). So a version whose fsync failed must never
// be reported durable, its file must never be synced again and committed,
// and it is either rewritten from its source or reported failed.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "io/fault_env.h"
#include "format/file_names.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

class FsyncFailureTest : public ::testing::Test {
 protected:
  // The levels' directories exist, as an earlier run left them: the store
  // writes its identity file into each at open, unsynced; the first version
  // committed in a directory syncs it first (one more sync per level).
  void SetUp() override {
    for (const char* level : {"/l2/s", "/l4/s"}) fs::create_directories(dir.path() + level);
  }
  Config config(int every) const {
    return Config::load("", {{"local.path", dir.path() + "/l2"},
                             {"persistent.path", dir.path() + "/l4"},
                             {"persistent.every", std::to_string(every)},
                             {"local.keep", "0"},
                             {"persistent.keep", "0"},
                             {"log.level", "off"}});
  }
  std::string file(int level, int version) const {
    return dir.path() + (level == 2 ? "/l2/s/" : "/l4/s/") + format::container_file_name(version, 0);
  }
  // Checkpoints `version` with every value equal to it.
  void checkpoint(Store& store, int version) {
    std::fill(values.begin(), values.end(), static_cast<double>(version));
    store.checkpoint(version);
  }
  // The next fsync of version `version`'s file at `level` fails.
  void fail_next_fsync(int level, int version) {
    env->inject({FaultEnv::Op::kSync, EIO, (level == 2 ? "/l2/s/." : "/l4/s/.") + format::container_file_name(version, 0),
                 0, 1, false});
  }

  TempDir dir;
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
  std::vector<double> values = std::vector<double>(50000);
};

TEST_F(FsyncFailureTest, FailedL2FsyncIsReportedAndTheFileIsNeverSyncedAgain) {
  Store store("s", config(0), env);
  const auto at_open = env->calls(FaultEnv::Op::kSync);
  store.protect(0, values.data(), values.size() * sizeof(double));
  checkpoint(store, 1);
  store.wait(1, 2);
  fail_next_fsync(2, 2);
  checkpoint(store, 2);
  EXPECT_THROW(store.wait(2, 2), StorageError);
  // One fsync per version, the failed one included: no retry that could
  // succeed on pages the kernel has already marked clean (and the
  // identity's, synced with version 1).
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync) - at_open, 3);
  EXPECT_FALSE(fs::exists(file(2, 2)));
  for (const VersionInfo& info : store.versions()) {
    EXPECT_FALSE(info.version == 2 && !info.levels.empty()) << "version 2 reported at a level";
  }
  checkpoint(store, 3);
  store.wait(3, 2);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync) - at_open, 4);
  store.close();

  Store fresh("s", config(0));
  fresh.protect(0, values.data(), values.size() * sizeof(double));
  EXPECT_EQ(fresh.restart(), 3);
  EXPECT_THROW(fresh.restart(2), NotFoundError);
}

TEST_F(FsyncFailureTest, VersionWhoseL2FsyncFailedNeverReachesL4) {
  Store store("s", config(1), env);
  store.protect(0, values.data(), values.size() * sizeof(double));
  fail_next_fsync(2, 1);
  checkpoint(store, 1);
  EXPECT_THROW(store.wait(1, 2), StorageError);
  EXPECT_THROW(store.wait(1, 4), StorageError);
  EXPECT_FALSE(fs::exists(file(2, 1)));
  EXPECT_FALSE(fs::exists(file(4, 1)));
}

TEST_F(FsyncFailureTest, FailedL4FsyncIsReportedAndTheCopyIsNeverSyncedAgain) {
  Store store("s", config(1), env);
  const auto at_open = env->calls(FaultEnv::Op::kSync);
  store.protect(0, values.data(), values.size() * sizeof(double));
  fail_next_fsync(4, 1);
  checkpoint(store, 1);
  store.wait(1, 2);
  EXPECT_THROW(store.wait(1, 4), StorageError);
  // L2 once, L4 once (and each level's identity): the failed copy is not
  // synced again.
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync) - at_open, 4);
  EXPECT_TRUE(fs::exists(file(2, 1)));
  EXPECT_FALSE(fs::exists(file(4, 1)));
  checkpoint(store, 2);
  store.wait(2, 4);
  store.close();

  // Version 1 stays durable at L2, where restart finds it.
  Store fresh("s", config(1));
  fresh.protect(0, values.data(), values.size() * sizeof(double));
  EXPECT_EQ(fresh.restart(1), 1);
  EXPECT_EQ(values.front(), 1.0);
}

}  // namespace
}  // namespace resurgo
