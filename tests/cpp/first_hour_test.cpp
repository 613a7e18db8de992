// What a new user meets in the first hour (issue 28): a level's directory
// is made when the first version goes there, so that a store that never
// wrote leaves nothing behind and a read-only working directory stops only
// L4; local.keep applied at close to what earlier runs left; a C handle
// used after rsg_close refused instead of read from freed memory.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/c_store.h"
#include "error_text.h"
#include "forwarding_env.h"
#include "levels_in_temp_dir.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> entries_under(const std::string& root) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(root)) found.push_back(entry.path().string());
  return found;
}

// An Env in which nothing can be made under `read_only`, as in a working
// directory the user cannot write (the tests may run as root, whom mode
// bits do not stop).
class ReadOnlyEnv final : public ForwardingEnv {
 public:
  explicit ReadOnlyEnv(std::string read_only) : read_only_(std::move(read_only)) {}
  void create_dirs(const std::string& dir) override {
    if (dir.rfind(read_only_, 0) == 0 && !exists(dir)) {
      throw StorageError("cannot create directory '" + dir + "': Read-only file system");
    }
    base_->create_dirs(dir);
  }

 private:
  std::string read_only_;
};

class FirstHourTest : public ::testing::Test {
 protected:
  // L2 and L4 two directories deep, so that a test sees any directory made.
  Config config(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/node/l2"},
                                               {"persistent.path", dir.path() + "/work/checkpoints"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::vector<std::string> versions_in(const std::string& store_dir) {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(store_dir)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".rsg")) found.push_back(name);
    }
    std::sort(found.begin(), found.end());
    return found;
  }
  static std::string file_name(int version) {
    char name[64];
    std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, 0);
    return name;
  }
  TempDir dir;
  std::vector<double> u = std::vector<double>(512, 1.0);
};

TEST_F(FirstHourTest, AStoreThatNeverWroteLeavesNoDirectory) {
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    EXPECT_FALSE(store.latest());
    EXPECT_THROW(store.restart(), NotFoundError);  // reading makes nothing either
    store.close();
  }
  {
    Store memory_only("m", config({{"memory.every", "1"}, {"local.every", "0"}, {"persistent.every", "0"}}));
    memory_only.protect(0, u.data(), u.size() * sizeof(double), "u");
    memory_only.checkpoint(1);
    memory_only.wait(1, kL1);
    memory_only.close();
  }
  EXPECT_EQ(entries_under(dir.path()), std::vector<std::string>{});
}

TEST_F(FirstHourTest, TheFirstVersionMakesOnlyTheLevelsItGoesTo) {
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  store.wait(1, kL2);
  EXPECT_TRUE(fs::exists(dir.path() + "/node/l2/s/" + file_name(1)));
  EXPECT_FALSE(fs::exists(dir.path() + "/work")) << "L4 takes every tenth checkpoint: nothing went there";
  store.close();
}

TEST_F(FirstHourTest, AReadOnlyWorkingDirectoryStopsOnlyL4) {
  auto env = std::make_shared<ReadOnlyEnv>(dir.path() + "/work");
  fs::create_directories(dir.path() + "/work");
  Store store("s", config({{"persistent.every", "2"}}), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  store.wait(1, kL2);
  store.checkpoint(2);  // its L4 copy fails in the background, as a full disk would fail it
  const std::string message = message_of<Error>([&] { store.wait(2, kL4); });
  EXPECT_CONTAINS(message, "version 2");
  EXPECT_CONTAINS(message, dir.path() + "/work/checkpoints");
  EXPECT_CONTAINS(message, "persistent.path");
  EXPECT_CONTAINS(message, "persistent.every = 0");
  store.checkpoint(3);
  store.wait(3, kL2);
  store.close();
  EXPECT_EQ(versions_in(dir.path() + "/node/l2/s"), (std::vector<std::string>{file_name(2), file_name(3)}));
  EXPECT_FALSE(fs::exists(dir.path() + "/work/checkpoints"));
}

TEST_F(FirstHourTest, ASecondStoreOfTheProcessIsRefusedBeforeAnyDirectoryExists) {
  Store first("s", config());
  const std::string message = message_of<Error>([&] { Store("s", config()); });
  EXPECT_CONTAINS(message, "is locked");
  EXPECT_CONTAINS(message, dir.path() + "/node/l2/s/.lock.r000000");
  first.protect(0, u.data(), u.size() * sizeof(double), "u");
  first.checkpoint(1);  // the refused store released nothing of the first's
  first.close();
  Store after_close("s", config());  // the claim went with the close
}

// Processes of one job opened without a communicator (their ranks from the
// launcher's PMI_RANK) share the directories: the first to make one writes
// its identity, and the identities the others drew give way to it.
TEST_F(FirstHourTest, RanksOpeningTogetherTakeTheIdentityOfWhoMadeTheDirectory) {
  ::setenv("PMI_RANK", "0", 1);
  Store first("s", config({{"persistent.every", "1"}}));
  ::setenv("PMI_RANK", "1", 1);
  Store second("s", config({{"persistent.every", "1"}}));
  ::unsetenv("PMI_RANK");
  std::vector<double> v(u.size(), 2.0);
  first.protect(0, u.data(), u.size() * sizeof(double), "u");
  second.protect(0, v.data(), v.size() * sizeof(double), "u");
  first.checkpoint(1);
  second.checkpoint(1);
  EXPECT_NO_THROW(first.wait(1, kL4));
  EXPECT_NO_THROW(second.wait(1, kL4)) << "the second rank's versions went to the directories the first made";
  first.close();
  second.close();
}

TEST_F(FirstHourTest, AFileInTheWayOfL4FailsTheOpen) {
  fs::create_directories(dir.path() + "/work");
  write_file(dir.path() + "/work/checkpoints", {std::byte{1}});
  const std::string message = message_of<Error>([&] { Store("s", config()); });
  EXPECT_CONTAINS(message, dir.path() + "/work/checkpoints");
  EXPECT_CONTAINS(message, "not one");
}

TEST_F(FirstHourTest, KeepRemovesAtCloseWhatEarlierRunsLeft) {
  {
    Store store("s", config({{"local.keep", "0"}, {"persistent.every", "1"}, {"persistent.keep", "0"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version = 1; version <= 5; ++version) store.checkpoint(version);
    store.close();
  }
  ASSERT_EQ(versions_in(dir.path() + "/node/l2/s").size(), 5u);
  Store store("s", config({{"local.keep", "2"}, {"persistent.every", "1"}, {"persistent.keep", "3"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(store.restart(), 5);
  store.close();
  EXPECT_EQ(versions_in(dir.path() + "/node/l2/s"), (std::vector<std::string>{file_name(4), file_name(5)}));
  EXPECT_EQ(versions_in(dir.path() + "/work/checkpoints/s"),
            (std::vector<std::string>{file_name(3), file_name(4), file_name(5)}));
}

// The surplus goes soon after restart, without waiting for a close.
TEST_F(FirstHourTest, KeepRemovesAfterARestartWhatEarlierRunsLeft) {
  {
    Store store("s", config({{"local.keep", "0"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version = 1; version <= 5; ++version) store.checkpoint(version);
    store.close();
  }
  Store store("s", config({{"local.keep", "2"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(store.restart(), 5);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (versions_in(dir.path() + "/node/l2/s").size() > 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(versions_in(dir.path() + "/node/l2/s"), (std::vector<std::string>{file_name(4), file_name(5)}));
}

TEST_F(FirstHourTest, KeepAtCloseLeavesALevelThatTakesNoCheckpoint) {
  {
    Store store("s", config({{"local.keep", "0"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version = 1; version <= 4; ++version) store.checkpoint(version);
    store.close();
  }
  Store store("s", config({{"memory.every", "1"}, {"local.every", "0"}, {"local.keep", "1"}}));
  store.close();
  EXPECT_EQ(versions_in(dir.path() + "/node/l2/s").size(), 4u);
}

// ------------------------------------------------------------- the C API

class ClosedHandleTest : public LevelsInTempDirTest {};

TEST_F(ClosedHandleTest, ACallAfterCloseIsRefusedAndSaysSo) {
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "closed", &store), RSG_OK) << rsg_last_error();
  double value = 1.0;
  ASSERT_EQ(rsg_protect(store, 0, &value, sizeof value, "value"), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_checkpoint(store, 1), RSG_ESTATE);
  EXPECT_CONTAINS(rsg_last_error(), "rsg_checkpoint on store 'closed': the store was closed by rsg_close");
  int version = 0;
  EXPECT_EQ(rsg_latest(store, &version), RSG_ESTATE);
  EXPECT_CONTAINS(rsg_last_error(), "rsg_latest on store 'closed'");
  EXPECT_EQ(rsg_close(store), RSG_ESTATE) << "a second close";
  EXPECT_CONTAINS(rsg_last_error(), "rsg_close on store 'closed'");
  rsg_store* again = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "closed", &again), RSG_OK) << "the closed handle holds no lock: "
                                                          << rsg_last_error();
  EXPECT_NE(again, store) << "a closed handle's memory is never given to a new store";
  EXPECT_EQ(rsg_close(again), RSG_OK) << rsg_last_error();
}

TEST_F(ClosedHandleTest, APointerThatIsNoHandleIsRefused) {
  alignas(rsg_store) unsigned char zeros[sizeof(rsg_store)] = {};
  auto* fake = reinterpret_cast<rsg_store*>(zeros);
  EXPECT_EQ(rsg_checkpoint(fake, 1), RSG_EINVAL);
  EXPECT_CONTAINS(rsg_last_error(), "rsg_checkpoint: the handle is not a store handle");
  EXPECT_EQ(rsg_close(nullptr), RSG_EINVAL);
}

}  // namespace
}  // namespace resurgo
