// A directory that open_directory makes is made durable in its parent by the
// directory's first sync(), not at open (include/resurgo/env.hpp,
// DirectoryRules::create): a store makes its directory on its first
// checkpoint's path, and what is in it needs the new entries to be durable
// only once something in it is. The power-loss campaign checks the
// durability through the path-based directory; these tests check the POSIX
// one, fsync by fsync.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "error_text.h"
#include "io/system_calls.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> fsynced_directories;  // the directories fsynced, in order
std::string failing_directory;              // a directory whose fsync fails (EIO)

std::string path_of_descriptor(int fd) { return fs::read_symlink("/proc/self/fd/" + std::to_string(fd)).string(); }

int recording_fsync(int fd) {
  const std::string path = path_of_descriptor(fd);
  if (path == failing_directory) {
    errno = EIO;
    return -1;
  }
  fsynced_directories.push_back(path);
  return ::fsync(fd);
}

class MadeDirectorySyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fsynced_directories.clear();
    failing_directory.clear();
    SystemCalls calls;
    calls.fsync = recording_fsync;
    env = posix_env_with(calls);
    root = fs::canonical(dir.path()).string();
  }
  TempDir dir;
  std::shared_ptr<Env> env;
  std::string root;
};

TEST_F(MadeDirectorySyncTest, OpenMakesTheDirectoriesAndTheFirstSyncMakesThemDurable) {
  const std::unique_ptr<Directory> store = env->open_directory(root + "/node/l2/store", DirectoryRules{});
  EXPECT_TRUE(fs::is_directory(root + "/node/l2/store"));
  EXPECT_TRUE(fsynced_directories.empty()) << "open fsynced_directories " << fsynced_directories.front();
  store->sync();
  EXPECT_EQ(fsynced_directories, (std::vector<std::string>{root, root + "/node", root + "/node/l2", root + "/node/l2/store"}));
  fsynced_directories.clear();
  store->sync();
  EXPECT_EQ(fsynced_directories, std::vector<std::string>{root + "/node/l2/store"});
}

TEST_F(MadeDirectorySyncTest, AnExistingDirectoryHasNoParentToSync) {
  fs::create_directories(root + "/store");
  const std::unique_ptr<Directory> store = env->open_directory(root + "/store", DirectoryRules{});
  store->sync();
  EXPECT_EQ(fsynced_directories, std::vector<std::string>{root + "/store"});
}

TEST_F(MadeDirectorySyncTest, AParentThatCannotBeSyncedFailsTheSyncAndIsTriedAgain) {
  const std::unique_ptr<Directory> store = env->open_directory(root + "/node/store", DirectoryRules{});
  failing_directory = root + "/node";
  const std::string message = message_of<StorageError>([&] { store->sync(); });
  EXPECT_CONTAINS(message, "cannot make the new directory '" + root + "/node/store' durable");
  EXPECT_EQ(fsynced_directories, std::vector<std::string>{root});
  failing_directory.clear();
  fsynced_directories.clear();
  store->sync();
  EXPECT_EQ(fsynced_directories, (std::vector<std::string>{root + "/node", root + "/node/store"}));
}

}  // namespace
}  // namespace resurgo
