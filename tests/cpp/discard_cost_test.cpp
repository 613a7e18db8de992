// What a discard costs (issue 27): a version the store already took out of
// memory, settled and held by no other level, wakes no thread; the eviction
// thread looks only in the levels that may hold versions (a memory-only
// store opens no directory); and the discard's semantics stay: a version
// still on its way is removed once it lands, a directory that existed at
// open has its copy removed, a removal that fails is retried by the next
// discard.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <optional>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "base/units.h"
#include "core/catalog.h"
#include "forwarding_level.h"
#include "full_version.h"
#include "hook_env.h"
#include "pipeline/scheduler.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

// A memory level that records which threads asked it whether it holds a
// version, and which removed one.
class WatchedLevel final : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;

  bool holds(int version) override {
    record(holders_);
    return level_.holds(version);
  }
  void remove(int version) override {
    record(removers_);
    level_.remove(version);
  }
  std::vector<int> versions() override {
    ++listings;
    return level_.versions();
  }
  std::atomic<int> listings{0};
  std::vector<std::thread::id> holders() const {
    std::lock_guard lock(mutex_);
    return holders_;
  }
  std::vector<std::thread::id> removers() const {
    std::lock_guard lock(mutex_);
    return removers_;
  }

 private:
  void record(std::vector<std::thread::id>& threads) {
    std::lock_guard lock(mutex_);
    threads.push_back(std::this_thread::get_id());
  }

  mutable std::mutex mutex_;
  std::vector<std::thread::id> holders_;
  std::vector<std::thread::id> removers_;
};

struct MemoryRoute {
  void take(int version) {
    catalog.add(version, Clock::now(), {kL1}, VersionStats{});
    scheduler.submit(version, {&level}, testing::full_version("discard", version, state));
    catalog.wait_settled(version, kL1);
  }

  MemoryLevel memory{"discard", 0, 16 * kMiB, 0};
  WatchedLevel level{memory};
  Config config;
  ThreadPool pool{1};
  Catalog catalog{"discard"};
  const Logger log{"discard", LogLevel::kOff};
  Trace trace{""};
  const std::vector<std::byte> state = std::vector<std::byte>(64 * 1024, std::byte{7});
  Scheduler scheduler{{{&level, 1}}, config.pipeline, pool, catalog, log, trace};  // last: stopped first
};

TEST(DiscardCostTest, ASettledVersionOutOfMemoryIsDiscardedOnTheCallersThreadAlone) {
  MemoryRoute route;
  route.take(1);
  route.memory.remove(1);  // as Store::discard does first
  route.scheduler.discard(1);
  route.scheduler.drain();
  for (const std::thread::id thread : route.level.holders()) {
    EXPECT_EQ(thread, std::this_thread::get_id()) << "the eviction thread was woken for nothing to remove";
  }
  EXPECT_TRUE(route.level.removers().empty());
}

// The discard that wakes the eviction thread runs on the application's
// thread, which must not lose its core to it before the call returns.
TEST(DiscardCostTest, TheEvictionThreadDoesNotPreemptTheThreadThatWakesIt) {
  MemoryRoute route;
  std::optional<int> policy;
  ASSERT_TRUE(eventually([&] { return (policy = policy_of_thread("rsg evict")).has_value(); }));
  EXPECT_EQ(policy, SCHED_BATCH);
}

TEST(DiscardCostTest, AVersionStillHeldIsRemovedOffTheCallersThread) {
  MemoryRoute route;
  route.take(1);
  route.take(2);
  route.scheduler.discard(1);
  route.scheduler.drain();
  EXPECT_FALSE(route.memory.holds(1));
  EXPECT_TRUE(route.memory.holds(2));
  const std::vector<std::thread::id> removers = route.level.removers();
  ASSERT_EQ(removers.size(), 1u);
  EXPECT_NE(removers.front(), std::this_thread::get_id()) << "the caller paid the removal";
}

TEST(DiscardCostTest, AVersionDiscardedOnItsWayIsRemovedOnceItLands) {
  MemoryRoute route;
  route.catalog.add(1, Clock::now(), {kL1}, VersionStats{});
  route.scheduler.discard(1);  // not in memory yet: the eviction thread waits for it
  route.scheduler.submit(1, {&route.level}, testing::full_version("discard", 1, route.state));
  route.catalog.wait_settled(1, kL1);
  route.scheduler.drain();
  EXPECT_FALSE(route.memory.holds(1)) << "the discarded version stayed in memory once it landed";
}

// A discarded version must stay on a level only while a delta there builds
// on it. A store that wrote no delta has no such version newer than one it
// wrote (versions increase): the discard removes it without listing the
// level's versions (a directory listing on L2, at nearly every save of an
// adjoint run).
TEST(DiscardCostTest, ADiscardInAStoreThatWroteNoDeltaListsNoLevel) {
  MemoryRoute route;
  for (int version = 1; version <= 5; ++version) route.take(version);
  route.level.listings = 0;
  for (const int version : {3, 1}) {
    route.catalog.discard(version);
    route.scheduler.discard(version);
    route.scheduler.drain();
  }
  EXPECT_EQ(route.memory.versions(), (std::vector<int>{2, 4, 5}));
  EXPECT_EQ(route.level.listings, 0);
}

// Counts the directories the store opens.
class DirectoryCountingEnv final : public ForwardingEnv {
 public:
  std::unique_ptr<Directory> open_directory(const std::string& path, const DirectoryRules& rules) override {
    ++opened;
    return Env::open_directory(path, rules);
  }
  std::atomic<int> opened{0};
};

class DiscardCostStoreTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.path", dir.path() + "/l4"},
                                               {"persistent.every", "0"},
                                               {"local.keep", "0"},
                                               {"memory.keep", "0"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  static std::map<std::string, std::string> memory_only() {
    return {{"memory.every", "1"}, {"local.every", "0"}, {"memory.capacity", "64MiB"}};
  }
  std::string l2(int version) const {
    char name[64];
    std::snprintf(name, sizeof name, "/l2/s/v%010d.r%06d.rsg", version, 0);
    return dir.path() + name;
  }
  // Writes versions 1 and 2 to L2, then closes the store.
  void write_to_l2() {
    Store store("s", config({{"memory.every", "0"}, {"local.every", "1"}}));
    store.protect(0, state.data(), state.size() * sizeof(double), "u");
    store.checkpoint(1);
    store.checkpoint(2);
  }
  static bool listed(Store& store, int version) {
    for (const VersionInfo& info : store.versions()) {
      if (info.version == version) return true;
    }
    return false;
  }

  TempDir dir;
  std::vector<double> state = std::vector<double>(32 * 1024, 1.5);  // 256 KiB
};

TEST_F(DiscardCostStoreTest, AMemoryOnlyStoreOpensNoDirectoryToDiscard) {
  const auto env = std::make_shared<DirectoryCountingEnv>();
  Store store("s", config(memory_only()), env);
  store.protect(0, state.data(), state.size() * sizeof(double), "u");
  const int opened_at_open = env->opened.load();
  for (int version = 1; version <= 20; ++version) {
    store.checkpoint(version);
    EXPECT_EQ(store.restart(version), version);
    store.discard(version);
  }
  for (int version = 1; version <= 20; ++version) EXPECT_FALSE(listed(store, version)) << version;
  store.close();  // the removals on the eviction thread are done
  EXPECT_EQ(env->opened.load(), opened_at_open) << "discards in a memory-only store opened directories";
  EXPECT_FALSE(fs::exists(dir.path() + "/l2/s"));
}

// A state larger than the straight-to-memory bound goes through the buffer
// and a worker: it may still be on its way when the discard comes.
TEST_F(DiscardCostStoreTest, ADiscardRightAfterABufferedCheckpointRemovesItOnceItLands) {
  state.assign(3 * kMiB / sizeof(double), 2.5);
  Store store("s", config(memory_only()));
  store.protect(0, state.data(), state.size() * sizeof(double), "u");
  for (int version = 1; version <= 5; ++version) {
    store.checkpoint(version);
    store.discard(version);
  }
  store.checkpoint(6);
  EXPECT_EQ(store.restart(), 6);  // the newest: waits for the removals first
  const std::vector<VersionInfo> left = store.versions();
  ASSERT_EQ(left.size(), 1u) << "a discarded version stayed in memory";
  EXPECT_EQ(left.front().version, 6);
}

TEST_F(DiscardCostStoreTest, ADiscardRemovesTheFileOfADirectoryLevelThatExistedAtOpen) {
  write_to_l2();
  ASSERT_TRUE(fs::exists(l2(1)) && fs::exists(l2(2)));
  Store store("s", config(memory_only()));  // L2 takes no checkpoint, but holds 1 and 2
  store.protect(0, state.data(), state.size() * sizeof(double), "u");
  store.discard(1);
  store.close();
  EXPECT_FALSE(fs::exists(l2(1))) << "the discarded version's file stayed on L2";
  EXPECT_TRUE(fs::exists(l2(2)));
}

TEST_F(DiscardCostStoreTest, AFailedRemovalOfADiscardedFileIsRetriedByTheNextDiscard) {
  write_to_l2();
  const auto env = std::make_shared<HookEnv>();
  std::atomic<int> refused{0};
  env->before_remove = [&](const std::string& path) {
    if (path == l2(1) && refused++ == 0) throw StorageError("remove '" + path + "': injected I/O error");
  };
  Store store("s", config(memory_only()), env);
  store.protect(0, state.data(), state.size() * sizeof(double), "u");
  store.discard(1);
  EXPECT_EQ(store.restart(), 2);  // the newest: waits for the removals first
  EXPECT_TRUE(fs::exists(l2(1))) << "the injected failure did not happen";
  store.discard(2);
  store.close();
  EXPECT_FALSE(fs::exists(l2(1))) << "the failed removal was not retried";
  EXPECT_FALSE(fs::exists(l2(2)));
}

}  // namespace
}  // namespace resurgo
