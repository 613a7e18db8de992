// What the first checkpoint after open does on the application's thread
// (bench/host_ab.py's "checkpoint 1 / checkpoint 5 after open"). A store
// whose L2 directory exists at open prepares it then (tier/route.h), so its
// first checkpoint is a capture like any other: no file-system call blocks
// it. A missing directory is made by the first version that goes there,
// before its capture: the version's header carries the store identity, and
// a drawn one is settled only as the directory is prepared (the identity
// race of docs/reliability.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "forwarding_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

// Records the Env calls (and the paths) made on one thread while it watches;
// the store's directories reach the Env through Env::open_directory's
// path-based default, so every file-system step of a level passes here.
class ThreadWatchingEnv final : public ForwardingEnv {
 public:
  void watch(std::thread::id thread) {
    std::lock_guard guard(mutex_);
    watched_ = thread;
    seen_.clear();
  }
  std::vector<std::string> seen() {
    std::lock_guard guard(mutex_);
    watched_ = std::thread::id();
    return seen_;
  }

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    note("create " + path);
    return base_->create(path, mode);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    note("open " + path);
    return base_->open(path);
  }
  void rename(const std::string& from, const std::string& to) override {
    note("rename " + from);
    base_->rename(from, to);
  }
  void remove(const std::string& path) override {
    note("remove " + path);
    base_->remove(path);
  }
  void sync_dir(const std::string& dir) override {
    note("sync_dir " + dir);
    base_->sync_dir(dir);
  }
  void create_dirs(const std::string& dir) override {
    note("create_dirs " + dir);
    base_->create_dirs(dir);
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    note("list_dir " + dir);
    return base_->list_dir(dir);
  }
  bool exists(const std::string& path) override {
    note("exists " + path);
    return base_->exists(path);
  }
  std::unique_ptr<FileLock> lock(const std::string& path) override {
    note("lock " + path);
    return base_->lock(path);
  }

 private:
  void note(const std::string& call) {
    std::lock_guard guard(mutex_);
    if (std::this_thread::get_id() == watched_) seen_.push_back(call);
  }

  std::mutex mutex_;
  std::thread::id watched_;
  std::vector<std::string> seen_;
};

std::string joined(const std::vector<std::string>& calls) {
  return std::accumulate(calls.begin(), calls.end(), std::string(),
                         [](const std::string& text, const std::string& call) { return text + "\n  " + call; });
}

class FirstCheckpointPathTest : public ::testing::Test {
 protected:
  // A state too large for the memory level's direct path: copied into the
  // staging buffer, written to L2 by the pipeline.
  FirstCheckpointPathTest() : state(2 << 20, std::byte{7}) {}

  std::unique_ptr<Store> open() {
    const Config config = Config::load("", {{"local.path", dir.path() + "/l2"},
                                            {"persistent.path", dir.path() + "/l4"},
                                            {"persistent.every", "0"}});
    auto store = std::make_unique<Store>("s", config, env);
    store->protect(0, state.data(), state.size(), "state");
    return store;
  }
  // The Env calls checkpoint(version) made on this thread.
  std::vector<std::string> checkpoint(Store& store, int version) {
    env->watch(std::this_thread::get_id());
    store.checkpoint(version);
    std::vector<std::string> calls = env->seen();
    store.wait(version, kL2);
    return calls;
  }

  TempDir dir;
  std::shared_ptr<ThreadWatchingEnv> env = std::make_shared<ThreadWatchingEnv>();
  std::vector<std::byte> state;
};

TEST_F(FirstCheckpointPathTest, ADirectoryThereAtOpenCostsTheFirstCheckpointNoFileSystemCall) {
  std::filesystem::create_directories(dir.path() + "/l2/s");
  const std::unique_ptr<Store> store = open();
  const std::vector<std::string> first = checkpoint(*store, 0);
  EXPECT_TRUE(first.empty()) << "the first checkpoint's path:" << joined(first);
  const std::vector<std::string> second = checkpoint(*store, 1);
  EXPECT_TRUE(second.empty()) << "the second checkpoint's path:" << joined(second);
  store->close();
}

TEST_F(FirstCheckpointPathTest, AMissingDirectoryIsMadeOnTheFirstCheckpointsPathOnly) {
  const std::unique_ptr<Store> store = open();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/l2/s")) << "open makes no directory";
  const std::vector<std::string> first = checkpoint(*store, 0);
  EXPECT_FALSE(first.empty()) << "the directory, its lock and the identity are made before the capture";
  const std::vector<std::string> second = checkpoint(*store, 1);
  EXPECT_TRUE(second.empty()) << "the second checkpoint's path:" << joined(second);
  store->close();
}

}  // namespace
}  // namespace resurgo
