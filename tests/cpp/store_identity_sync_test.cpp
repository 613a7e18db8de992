// The store identity file (format/store_id.h) is written without a sync when
// a directory is prepared, on the first checkpoint's path, and synced by the
// first commit that makes a version durable there. A power loss in between
// may leave the name without its bytes: a directory without versions then
// counts as holding no identity, and the next store writes its own over the
// damaged one (tests/power runs the states; these tests the rules).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "error_text.h"
#include "format/file_names.h"
#include "format/store_id.h"
#include "io/fault_env.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

ino_t inode_of(const std::string& path) {
  struct stat status {};
  EXPECT_EQ(::stat(path.c_str(), &status), 0) << path;
  return status.st_ino;
}

class StoreIdentitySyncTest : public ::testing::Test {
 protected:
  void SetUp() override { level.prepare(); }
  std::string identity_path() const { return dir.path() + "/l2/s/" + format::kStoreIdFileName; }
  std::string identity_text() const {
    std::ifstream in(identity_path());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write_identity_text(const std::string& text) const { std::ofstream(identity_path()) << text; }
  void commit(int version) {
    level.commit(version, [](WritableFile& file) { file.append("bytes", 5); });
  }

  TempDir dir;
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
  DirectoryLevel level{2, dir.path() + "/l2", "s", 0, 0600, 0, env};
  format::StoreId id = format::StoreId::random();
};

TEST_F(StoreIdentitySyncTest, TheFirstDurableCommitSyncsTheIdentityNotItsAdoption) {
  const int before = env->calls(FaultEnv::Op::kSync);
  EXPECT_EQ(level.adopt_identity(id), id);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), before);
  EXPECT_EQ(identity_text(), id.hex() + "\n");
  commit(1);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), before + 2);  // the identity, then the version
  commit(2);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), before + 3);
}

TEST_F(StoreIdentitySyncTest, AFailedIdentitySyncFailsTheCommitAndTheNextOneWritesItAgain) {
  level.adopt_identity(id);
  env->inject({FaultEnv::Op::kSync, EIO, std::string("/l2/s/.") + format::kStoreIdFileName, 0, 1, false});
  const std::string message = message_of<StorageError>([&] { commit(1); });
  EXPECT_CONTAINS(message, "cannot make the store identity file '" + identity_path() + "' durable");
  EXPECT_FALSE(fs::exists(dir.path() + "/l2/s/" + format::container_file_name(1, 0)));
  const ino_t first_inode = inode_of(identity_path());
  const int before = env->calls(FaultEnv::Op::kSync);
  const int creates = env->calls(FaultEnv::Op::kCreate);
  commit(2);
  // Not the same file synced again (its pages may be gone): a new one.
  EXPECT_EQ(env->calls(FaultEnv::Op::kCreate), creates + 2);  // the identity's temporary, the version's
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), before + 2);
  EXPECT_NE(inode_of(identity_path()), first_inode);
  EXPECT_EQ(identity_text(), id.hex() + "\n");
  EXPECT_TRUE(fs::exists(dir.path() + "/l2/s/" + format::container_file_name(2, 0)));
}

TEST_F(StoreIdentitySyncTest, AnIdentityFoundWithoutVersionsIsWrittenAgainAndSyncedByTheFirstCommit) {
  const format::StoreId theirs = format::StoreId::random();
  write_identity_text(theirs.hex() + "\n");
  const int creates = env->calls(FaultEnv::Op::kCreate);
  EXPECT_EQ(level.adopt_identity(id), theirs);
  EXPECT_EQ(env->calls(FaultEnv::Op::kCreate), creates + 1);
  EXPECT_EQ(identity_text(), theirs.hex() + "\n");
  const int syncs = env->calls(FaultEnv::Op::kSync);
  commit(1);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), syncs + 2);
}

TEST_F(StoreIdentitySyncTest, AnIdentityFoundBesideVersionsIsTakenAsItIs) {
  const format::StoreId theirs = format::StoreId::random();
  write_identity_text(theirs.hex() + "\n");
  commit(1);
  const int creates = env->calls(FaultEnv::Op::kCreate);
  const int syncs = env->calls(FaultEnv::Op::kSync);
  EXPECT_EQ(level.adopt_identity(id), theirs);
  commit(2);
  EXPECT_EQ(env->calls(FaultEnv::Op::kCreate), creates + 1);  // the version's temporary alone
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), syncs + 1);
}

TEST_F(StoreIdentitySyncTest, ADamagedIdentityInADirectoryWithoutVersionsIsReplaced) {
  for (const std::string& damaged : {std::string(), std::string(33, '\0'), std::string("not an identity")}) {
    write_identity_text(damaged);
    EXPECT_EQ(level.identity(), std::nullopt);
    EXPECT_EQ(level.adopt_identity(id), id);
    EXPECT_EQ(identity_text(), id.hex() + "\n");
  }
}

TEST_F(StoreIdentitySyncTest, ADamagedIdentityBesideVersionsIsRefusedNamingTheFile) {
  commit(1);
  write_identity_text("");
  const std::string message = message_of<CorruptionError>([&] { level.identity(); });
  EXPECT_CONTAINS(message, "store identity file '" + identity_path() + "' is damaged");
  EXPECT_THROW(level.adopt_identity(id), CorruptionError);
}

TEST_F(StoreIdentitySyncTest, AnIdentityWrittenBesideVersionsIsSyncedAtOnce) {
  commit(1);
  const int syncs = env->calls(FaultEnv::Op::kSync);
  EXPECT_EQ(level.adopt_identity(id), id);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), syncs + 1);
  commit(2);
  EXPECT_EQ(env->calls(FaultEnv::Op::kSync), syncs + 2);
}

}  // namespace
}  // namespace resurgo
