// Safe storage on shared machines (docs/reliability.md, "Security"): the
// checks of a store's directories, the files opened and created in them, and
// the store identity that keeps one store from restarting from another's
// versions. Attacks by a second user run in tests/security/campaign; what
// needs root here (giving a file away) is skipped without it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "error_text.h"
#include "format/container.h"
#include "format/file_names.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "thread_job.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUser = 60001;

void make_dir(const std::string& path, mode_t mode) {
  fs::create_directories(path);
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::string open_error(const std::string& path, DirectoryRules rules = {}) {
  return message_of<Error>([&] { Env::posix()->open_directory(path, rules); });
}

class SafeDirectoryTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string root_ = dir_.path();
};

TEST_F(SafeDirectoryTest, MissingDirectoriesAreMadeForTheUserAlone) {
  const std::string path = root_ + "/a/b/store";
  const std::unique_ptr<Directory> directory = Env::posix()->open_directory(path, {});
  for (const std::string& made : {root_ + "/a", root_ + "/a/b", path}) {
    struct stat status {};
    ASSERT_EQ(::stat(made.c_str(), &status), 0);
    EXPECT_EQ(status.st_mode & 07777, 0700u) << made;
    EXPECT_EQ(status.st_uid, ::geteuid());
  }
  EXPECT_THROW(Env::posix()->open_directory(root_ + "/missing", DirectoryRules{false, false}), NotFoundError);
}

TEST_F(SafeDirectoryTest, ADirectoryOthersCanWriteIsRefusedNamingItAndWhatToDo) {
  const std::string path = root_ + "/store";
  make_dir(path, 0777);
  const std::string message = open_error(path);
  EXPECT_CONTAINS(message, path);
  EXPECT_CONTAINS(message, "writable by every user (mode 0777)");
  EXPECT_CONTAINS(message, "remove it or give a path of your own");
}

TEST_F(SafeDirectoryTest, AGroupDirectoryIsAcceptedOnlyWhenTheConfigurationSharesIt) {
  const std::string path = root_ + "/project";
  make_dir(path, 02770);
  EXPECT_CONTAINS(open_error(path), "writable by its group");
  EXPECT_CONTAINS(open_error(path), "shared with your group");
  EXPECT_EQ(open_error(path, DirectoryRules{true, true}), "");
}

TEST_F(SafeDirectoryTest, AnAncestorOthersCanWriteIsRefusedUnlessSticky) {
  const std::string above = root_ + "/open";
  make_dir(above, 0777);
  make_dir(above + "/store", 0700);
  const std::string message = open_error(above + "/store");
  EXPECT_CONTAINS(message, "the directory '" + above + "' above it is writable by every user");
  ASSERT_EQ(::chmod(above.c_str(), 01777), 0);  // as /tmp: others cannot rename what is yours
  EXPECT_EQ(open_error(above + "/store"), "");
}

TEST_F(SafeDirectoryTest, LinksAreFollowedOnlyWhereNobodyElseCouldHaveMadeThem) {
  make_dir(root_ + "/real", 0700);
  fs::create_directory_symlink(root_ + "/real", root_ + "/link");
  const std::unique_ptr<Directory> directory = Env::posix()->open_directory(root_ + "/link/store", {});
  EXPECT_TRUE(fs::is_directory(root_ + "/real/store"));
  if (::geteuid() != 0) GTEST_SKIP() << "giving a link to another user needs root";
  ASSERT_EQ(::lchown((root_ + "/link").c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_CONTAINS(open_error(root_ + "/link/store"), "is a link made by user 60001");
}

TEST_F(SafeDirectoryTest, AStickyDirectoryServesASingleFileNeverAStore) {
  const std::string shared = root_ + "/shared";
  make_dir(shared, 01777);  // as /tmp
  EXPECT_CONTAINS(open_error(shared), "writable by every user");
  DirectoryRules rules;
  rules.accept_sticky = true;
  EXPECT_EQ(open_error(shared, rules), "");
  // The trace of a store goes there (trace.path = "/tmp/trace.json").
  {
    Config config =
        Config::load("", {{"local.path", root_ + "/l2"}, {"persistent.every", "0"}, {"log.level", "off"}});
    config.set("trace.path", shared + "/trace.json");
    Store store("s", config);
    std::vector<int> state(100, 1);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    store.checkpoint(1);
  }
  EXPECT_TRUE(fs::is_regular_file(shared + "/trace.json"));
}

TEST_F(SafeDirectoryTest, ADirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  const std::string path = root_ + "/theirs";
  make_dir(path, 0700);
  ASSERT_EQ(::chown(path.c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_CONTAINS(open_error(path), "belongs to user 60001, not to you");
  make_dir(path + "/inner", 0700);  // yours, below theirs
  EXPECT_CONTAINS(open_error(path + "/inner"), "above it belongs to user 60001");
}

class SafeFileTest : public SafeDirectoryTest {
 protected:
  void SetUp() override { directory_ = Env::posix()->open_directory(root_ + "/store", {}); }
  std::string at(const std::string& name) const { return root_ + "/store/" + name; }
  std::string open_error_of(const std::string& name) {
    return message_of<Error>([&] { directory_->open(name); });
  }
  std::unique_ptr<Directory> directory_;
};

TEST_F(SafeFileTest, CreateNeverFollowsALinkNorReplacesAFile) {
  write_file(root_ + "/victim", {std::byte{42}});
  fs::create_symlink(root_ + "/victim", at("planted"));
  EXPECT_THROW(directory_->create("planted", 0600), StorageError);
  EXPECT_EQ(read_file(root_ + "/victim"), std::vector<std::byte>{std::byte{42}});
  write_file(at("kept"), {std::byte{7}});
  EXPECT_THROW(directory_->create("kept", 0600), StorageError);
  EXPECT_EQ(read_file(at("kept")), std::vector<std::byte>{std::byte{7}});
  directory_->create("new", 0640)->close();
  struct stat status {};
  ASSERT_EQ(::stat(at("new").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0640u);
}

TEST_F(SafeFileTest, OpenReadsOnlyRegularFilesAndNeverBlocksOnAFifo) {
  ASSERT_EQ(::mkfifo(at("fifo").c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] { return open_error_of("fifo"); });
  ASSERT_EQ(opened.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "open blocked on a FIFO";
  EXPECT_CONTAINS(opened.get(), "not a regular file");
  write_file(root_ + "/victim", {std::byte{1}});
  fs::create_symlink(root_ + "/victim", at("link"));
  EXPECT_NE(open_error_of("link"), "");
  fs::create_directory(at("sub"));
  EXPECT_CONTAINS(open_error_of("sub"), "not a regular file");
  EXPECT_THROW(directory_->open("missing"), NotFoundError);
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  write_file(at("theirs"), {std::byte{1}});
  ASSERT_EQ(::chown(at("theirs").c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_CONTAINS(open_error_of("theirs"), "belongs to user 60001");
}

TEST_F(SafeFileTest, ALockFileIsNeverALink) {
  write_file(root_ + "/victim", {std::byte{1}});
  fs::create_symlink(root_ + "/victim", at(".lock.r000000"));
  EXPECT_THROW(directory_->lock(".lock.r000000"), StorageError);
  EXPECT_EQ(read_file(root_ + "/victim"), std::vector<std::byte>{std::byte{1}});
  fs::remove(at(".lock.r000000"));
  const std::unique_ptr<FileLock> held = directory_->lock(".lock.r000000");
  EXPECT_THROW(directory_->lock(".lock.r000000"), StateError);
}

TEST_F(SafeFileTest, RenameNewNeverReplaces) {
  write_file(at("first"), {std::byte{1}});
  write_file(at("second"), {std::byte{2}});
  EXPECT_FALSE(directory_->rename_new("second", "first"));
  EXPECT_EQ(read_file(at("first")), std::vector<std::byte>{std::byte{1}});
  EXPECT_TRUE(directory_->rename_new("second", "third"));
  EXPECT_FALSE(fs::exists(at("second")));
}

std::vector<std::byte> bytes_of(std::size_t count, int value) {
  return std::vector<std::byte>(count, static_cast<std::byte>(value));
}

// Directory::reuse writes over a file of this user from its start and ends
// it where the new bytes do (shorter or longer); it never replaces an
// existing name, never writes through a link and never writes another
// user's file, which it leaves as it is.
TEST_F(SafeFileTest, ReuseWritesOverTheFileAndEndsItWhereTheNewBytesEnd) {
  write_file(at("spare"), bytes_of(1000, 1));
  const auto shorter = bytes_of(300, 2);
  std::unique_ptr<WritableFile> file = directory_->reuse("spare", "shorter", 0640);
  file->append(shorter.data(), shorter.size());
  file->close();
  EXPECT_FALSE(fs::exists(at("spare")));
  EXPECT_EQ(read_file(at("shorter")), shorter);
  struct stat status {};
  ASSERT_EQ(::stat(at("shorter").c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0640u);
  const auto longer = bytes_of(5000, 3);
  file = directory_->reuse("shorter", "longer", 0600);
  file->append(longer.data(), 2000);
  file->append(longer.data() + 2000, 3000);
  file->sync();
  file->close();
  EXPECT_EQ(read_file(at("longer")), longer);
  write_file(at("kept"), {std::byte{7}});
  EXPECT_THROW(directory_->reuse("longer", "kept", 0600), StorageError);
  EXPECT_EQ(read_file(at("kept")), std::vector<std::byte>{std::byte{7}});
  write_file(root_ + "/victim", {std::byte{9}});
  fs::create_symlink(root_ + "/victim", at("link"));
  EXPECT_THROW(directory_->reuse("link", "through", 0600), StorageError);
  EXPECT_EQ(read_file(root_ + "/victim"), std::vector<std::byte>{std::byte{9}});
  if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
  write_file(at("theirs"), bytes_of(10, 4));
  ASSERT_EQ(::chown(at("theirs").c_str(), kOtherUser, kOtherUser), 0);
  EXPECT_THROW(directory_->reuse("theirs", "taken", 0600), StorageError);
  EXPECT_EQ(read_file(at("taken")), bytes_of(10, 4));
}

class StoreIdentityTest : public ::testing::Test {
 protected:
  Config config(const std::string& l2 = "l2", const std::string& l4 = "l4") const {
    return Config::load("", {{"local.path", dir_.path() + "/" + l2},
                             {"persistent.path", dir_.path() + "/" + l4},
                             {"persistent.every", "1"},
                             {"log.level", "off"}});
  }
  // Checkpoints `version` of a store whose state holds `value`.
  void checkpoint(const Config& config, int version, int value) {
    Store store("s", config);
    std::vector<int> state(1000, value);
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    store.checkpoint(version);
    store.wait(version, kL4);
  }
  std::string identity(const std::string& level_dir) const {
    std::ifstream in(dir_.path() + "/" + level_dir + "/s/" + format::kStoreIdFileName);
    std::string text;
    in >> text;
    return text;
  }

  TempDir dir_;
};

TEST_F(StoreIdentityTest, EveryDirectoryOfAStoreHoldsOneIdentityAndEveryVersionCarriesIt) {
  checkpoint(config(), 1, 1);
  const std::string id = identity("l2");
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(identity("l4"), id);
  const std::unique_ptr<ReadableFile> file = Env::posix()->open(dir_.path() + "/l4/s/" + format::container_file_name(1, 0));
  EXPECT_EQ(format::read_container(*file).header.store_id.hex(), id);
  checkpoint(config(), 2, 2);  // a second run of the same store keeps it
  EXPECT_EQ(identity("l2"), id);
}

TEST_F(StoreIdentityTest, AVersionCopiedFromAnotherStoreIsRefusedUnlessAccepted) {
  checkpoint(config("a2", "a4"), 1, 111);  // another run's store of the same name
  checkpoint(config(), 2, 2);
  fs::copy_file(dir_.path() + "/a4/s/" + format::container_file_name(1, 0),
                dir_.path() + "/l4/s/" + format::container_file_name(1, 0));
  std::vector<int> state(1000, 0);
  {
    Store store("s", config());
    store.protect(0, state.data(), state.size() * sizeof(int), "state");
    const std::string message = message_of<Error>([&] { store.restart(1); });
    EXPECT_CONTAINS(message, "was written by another store");
    EXPECT_CONTAINS(message, "restart.accept_foreign");
    EXPECT_EQ(store.restart(), 2);  // the newest of its own
    EXPECT_EQ(state.front(), 2);
  }
  Config accepting = config();
  accepting.set("restart.accept_foreign", "true");
  Store store("s", accepting);
  store.protect(0, state.data(), state.size() * sizeof(int), "state");
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(state.front(), 111);
}

TEST_F(StoreIdentityTest, DirectoriesOfTwoStoresOfOneNameDoNotOpenTogether) {
  checkpoint(config("a2", "l4"), 1, 1);
  checkpoint(config("b2", "b4"), 1, 1);
  // b2 (another store's L2) with l4: which is this store's cannot be told.
  const std::string message = message_of<Error>([&] { Store("s", config("b2", "l4")); });
  EXPECT_CONTAINS(message, "hold different store identities");
  EXPECT_CONTAINS(message, dir_.path() + "/b2/s");
  EXPECT_CONTAINS(message, dir_.path() + "/l4/s");
}

TEST_F(StoreIdentityTest, L4IsLockedAsL2Is) {
  Store first("s", config("a2", "l4"));
  const std::string message = message_of<Error>([&] { Store("s", config("b2", "l4")); });
  EXPECT_CONTAINS(message, "is locked");
  EXPECT_CONTAINS(message, dir_.path() + "/l4/s/.lock.r000000");
}

TEST_F(StoreIdentityTest, TheRanksOfAJobAgreeOnOneIdentity) {
  for (int run = 0; run < 2; ++run) {
    testing::ThreadJob job(3, 1);  // a node per rank: three L2 directories
    testing::run_ranks(job, [&](int rank) {
      Config ranks = config("node" + std::to_string(rank));
      Store store("s", ranks, std::make_shared<testing::ThreadComm>(job, rank, true));
      std::vector<int> state(100, rank);
      store.protect(0, state.data(), state.size() * sizeof(int), "state");
      store.checkpoint(1 + run);
      store.wait(1 + run, kL4);
      store.close();
    });
    const std::string id = identity("l4");
    for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(identity("node" + std::to_string(rank)), id) << rank;
  }
}

}  // namespace
}  // namespace resurgo
