// What a restart of a known version costs (issue 27): an adjoint restores
// a version at nearly every step, and a listing of the L2 directory after
// each restore (to find the newest version, which the next checkpoint must
// pass) was half of such a restart's time in a disk store. The store knew
// every version at open and has taken each since: only a restart of the
// newest lists the levels. The rule it served stays: after a restart of an
// older version, a checkpoint must still be newer than the newest held.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "hook_env.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

class RestartListingTest : public ::testing::Test {
 protected:
  Config l2_only() const {
    return Config::load("", {{"local.path", dir.path() + "/l2"},
                             {"local.every", "1"},
                             {"local.keep", "0"},
                             {"memory.every", "0"},
                             {"persistent.every", "0"},
                             {"log.level", "off"}});
  }
  void protect(Store& store) { store.protect(0, state.data(), state.size() * sizeof(double), "u"); }
  void take(Store& store, int version) {
    state.assign(state.size(), static_cast<double>(version));
    store.checkpoint(version);
  }

  TempDir dir;
  std::vector<double> state = std::vector<double>(8 * 1024, 0.0);
};

TEST_F(RestartListingTest, ARestartOfAKnownVersionListsNoDirectory) {
  const auto env = std::make_shared<HookEnv>();
  // Listings on the restarting thread: the eviction thread's passes list
  // L2 in the background (the first restart applies local.keep once), as
  // often as the machine's timing makes them due.
  const std::thread::id restarting = std::this_thread::get_id();
  std::atomic<int> listings{0};
  env->before_list = [&](const std::string&) {
    if (std::this_thread::get_id() == restarting) ++listings;
  };
  Store store("s", l2_only(), env);
  protect(store);
  for (int version = 1; version <= 3; ++version) take(store, version);
  store.wait(3, 2);
  listings = 0;
  for (int round = 0; round < 10; ++round) {
    EXPECT_EQ(store.restart(2), 2);
    EXPECT_EQ(state.front(), 2.0);
  }
  EXPECT_EQ(listings.load(), 0) << "restarts of version 2 listed a directory";
  take(store, 4);
  EXPECT_EQ(store.restart(), 4);
}

TEST_F(RestartListingTest, AfterARestartOfAnOlderVersionACheckpointMustPassTheNewestOnDisk) {
  {
    Store store("s", l2_only());
    protect(store);
    for (int version = 1; version <= 3; ++version) take(store, version);
  }
  Store store("s", l2_only());
  protect(store);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(state.front(), 1.0);
  EXPECT_THROW(store.checkpoint(2), InvalidArgumentError);
  EXPECT_THROW(store.checkpoint(3), InvalidArgumentError);
  take(store, 4);
  EXPECT_EQ(store.restart(), 4);
}

}  // namespace
}  // namespace resurgo
