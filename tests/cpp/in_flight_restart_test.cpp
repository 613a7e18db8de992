// Restart of a version still on its way to its first level, a directory
// level (issue 27): an adjoint's reverse pass restores a version saved a
// moment before, and the L2 commit ends with fdatasyncs and a directory
// fsync. A full version of host regions is copied from the capture's
// buffer instead (pipeline/in_flight.h); other versions wait as before.
// The L2 directory's fsync is held here until the test lets it go: a
// restart that waited for the commit would never return while held.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "forwarding_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "version_pattern.h"

namespace resurgo {
namespace {

// Holds every directory fsync under `held_dir` while closed.
class GatedSyncEnv final : public ForwardingEnv {
 public:
  explicit GatedSyncEnv(std::string held_dir) : held_dir_(std::move(held_dir)) {}

  void sync_dir(const std::string& dir) override {
    if (dir.rfind(held_dir_, 0) == 0) {
      std::unique_lock lock(mutex_);
      ++held_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
    }
    base_->sync_dir(dir);
  }
  void close_gate() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open_gate() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  // Until a commit waits at the gate.
  void wait_held() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return held_ > 0; });
  }

 private:
  std::string held_dir_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int held_ = 0;
};

class InFlightRestartTest : public ::testing::Test {
 protected:
  // 3 MiB: more than one piece of the buffer copy (1 MiB), so the copy is shared.
  static constexpr std::size_t kValues = (3u << 20) / sizeof(double);

  InFlightRestartTest() : env(std::make_shared<GatedSyncEnv>(dir.path() + "/l2")) {}

  Config config(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"local.every", "1"},
                                               {"local.keep", "0"},
                                               {"memory.every", "0"},
                                               {"persistent.every", "0"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  void fill(int version) { fill_version_pattern(u, version); }
  bool holds_state_of(int version) const { return has_version_pattern(u, version); }
  // Version 1 is durable first: the level's directory is made and synced
  // before the gate closes. Its restart is the store's first restart of a
  // version by number, from which on the store keeps the versions it
  // writes readable (Scheduler::read_in_flight).
  void first_version_durable(Store& store) {
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    fill(1);
    store.checkpoint(1);
    store.wait(1, kL2);
    EXPECT_EQ(store.restart(1), 1);
  }
  // Version 2's commit has started and waits at the gate for its
  // directory fsync.
  void version_2_held_in_its_commit(Store& store) {
    first_version_durable(store);
    env->close_gate();
    fill(2);
    store.checkpoint(2);
    env->wait_held();
  }
  // restart(version) on another thread; true when it returned (or threw)
  // within 20 s. The gate opens either way, so that the store can close;
  // then `restored` is what it returned, or it throws what the restart threw.
  bool restart_returns_while_held(Store& store, int version, int& restored) {
    auto restart = std::async(std::launch::async, [&] { return store.restart(version); });
    const bool returned = restart.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    env->open_gate();
    restored = restart.get();
    return returned;
  }

  // restart(version) does not return while the gate is closed; once it
  // opens, it reads the version from L2.
  void expect_restart_waits_for_the_level(Store& store, int version, const std::string& otherwise) {
    auto restart = std::async(std::launch::async, [&] { return store.restart(version); });
    EXPECT_EQ(restart.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << otherwise;
    env->open_gate();
    EXPECT_EQ(restart.get(), version);
    EXPECT_EQ(store.last_restart().level, kL2);
  }

  TempDir dir;
  std::shared_ptr<GatedSyncEnv> env;
  std::vector<double> u = std::vector<double>(kValues);
};

TEST_F(InFlightRestartTest, AVersionItsLevelStillCommitsIsCopiedFromTheBuffer) {
  Store store("s", config(), env);
  version_2_held_in_its_commit(store);
  fill(0);
  int restored = -1;
  EXPECT_TRUE(restart_returns_while_held(store, 2, restored)) << "the restart waited for the L2 commit";
  EXPECT_EQ(restored, 2);
  EXPECT_TRUE(holds_state_of(2));
  EXPECT_EQ(store.last_restart().level, kL1) << "the buffer's level";
  EXPECT_EQ(store.last_restart().bytes, u.size() * sizeof(double));
  EXPECT_EQ(store.last_restart().chain, std::vector<int>{2});

  store.wait(2, kL2);  // the commit the restart did not wait for is whole
  fill(0);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(holds_state_of(2));
  EXPECT_EQ(store.last_restart().level, kL2);
}

TEST_F(InFlightRestartTest, AVersionWaitingBehindAnotherCommitIsCopiedFromTheBuffer) {
  Store store("s", config(), env);
  version_2_held_in_its_commit(store);
  fill(3);
  store.checkpoint(3);  // queued behind version 2's commit
  fill(0);
  int restored = -1;
  EXPECT_TRUE(restart_returns_while_held(store, 3, restored));
  EXPECT_EQ(restored, 3);
  EXPECT_TRUE(holds_state_of(3));
  store.wait();
  fill(0);
  EXPECT_EQ(store.restart(3), 3);
  EXPECT_EQ(store.last_restart().level, kL2);
  EXPECT_TRUE(holds_state_of(3));
}

// The buffer's copy is checked as a level's: a region protected with
// another size than the version holds is refused, and says where it looked.
TEST_F(InFlightRestartTest, ARegionOfAnotherSizeIsRefusedNamingTheBuffer) {
  Store store("s", config(), env);
  version_2_held_in_its_commit(store);
  store.unprotect(0);
  std::vector<double> smaller(kValues / 2);
  store.protect(0, smaller.data(), smaller.size() * sizeof(double), "u");
  int restored = -1;
  try {
    EXPECT_TRUE(restart_returns_while_held(store, 2, restored)) << "the restart waited for the L2 commit";
    ADD_FAILURE() << "restart into a smaller region restored version " << restored;
  } catch (const MismatchError& error) {
    EXPECT_NE(std::string(error.what()).find("the capture's buffer"), std::string::npos) << error.what();
  }
}

// Until a store restarts a version by number, its checkpoints keep no copy
// of their headers for it: the first such restart waits for the level.
TEST_F(InFlightRestartTest, BeforeTheFirstRestartByNumberAVersionWaitsForItsLevel) {
  Store store("s", config(), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  fill(1);
  store.checkpoint(1);
  store.wait(1, kL2);
  env->close_gate();
  fill(2);
  store.checkpoint(2);
  env->wait_held();
  expect_restart_waits_for_the_level(store, 2, "restored from the buffer although no restart by number came before");
}

// A delta's bytes in the buffer are only the blocks written since its
// base: its restart waits for the level, as before.
TEST_F(InFlightRestartTest, ADeltaWaitsForItsLevel) {
  Store store("s", config({{"capture.mode", "delta"}, {"track.method", "hash"}}), env);
  first_version_durable(store);
  store.checkpoint(2);  // full again after the restart: the delta's base
  store.wait(2, kL2);
  env->close_gate();
  u[0] = -1;
  store.checkpoint(3);
  env->wait_held();
  expect_restart_waits_for_the_level(store, 3, "a delta was restored before its level held it");
  EXPECT_EQ(store.last_restart().chain, (std::vector<int>{3, 2})) << "version 3 is a delta";
  EXPECT_EQ(u[0], -1);
}

}  // namespace
}  // namespace resurgo
