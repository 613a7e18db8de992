// Group commit (issue 27, part 3): versions waiting together in the queue of
// a directory level are committed as one group (Level::commit_group), and
// versions held in the memory level wait for L2 only once the memory level
// is full of them (the backlog is bounded by its capacity, not by a count).
// The Scheduler runs over a real L2 directory behind a gate that holds the
// first commit, so that the versions submitted meanwhile queue up.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "base/units.h"
#include "core/catalog.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/version_writer.h"
#include "forwarding_level.h"
#include "full_version.h"
#include "io/bytes_file.h"
#include "io/fault_env.h"
#include "pipeline/scheduler.h"
#include "resurgo/config.hpp"
#include "test_util.h"
#include "tier/directory_level.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

constexpr char kStore[] = "group";

// The container bytes the Scheduler writes for that version of `state`.
std::vector<std::byte> container_of(int version, const std::vector<std::byte>& state, const Config& config) {
  const Snapshot snapshot = testing::full_version(kStore, version, state);
  ThreadPool pool(0);
  BytesFile file("expected");
  write_extents(file, snapshot.header, snapshot.extents, config.pipeline, pool);
  return file.take();
}

// A level that forwards to another and holds its first commit until
// opened, recording the size of every group it is given.
class GatedLevel final : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;

  void open_gate() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void wait_until_held() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return held_; });
  }
  std::vector<std::size_t> groups() {
    std::lock_guard lock(mutex_);
    return groups_;
  }

  void commit(int version, const std::function<void(WritableFile&)>& write) override {
    pass_gate();
    level_.commit(version, write);
  }
  void commit_copy(int version, const ReadableFile& source) override {
    pass_gate();
    level_.commit_copy(version, source);
  }
  std::vector<std::exception_ptr> commit_group(const std::vector<PendingCommit>& group) override {
    {
      std::lock_guard lock(mutex_);
      groups_.push_back(group.size());
    }
    return level_.commit_group(group);
  }

 private:
  void pass_gate() {
    std::unique_lock lock(mutex_);
    held_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool held_ = false;
  bool open_ = false;
  std::vector<std::size_t> groups_;
};

// Versions of distinct contents, and a Scheduler routing them through the
// levels start() names, each taking every version.
struct Pipeline {
  Pipeline() {
    // Within the headers' chunk size, and shorter than the memory level's
    // longest run: a version written there first is cut as a file's is.
    config.pipeline.chunk_size = kMiB / 2;
    l2.prepare();
  }
  ~Pipeline() { stop(); }
  void start(std::vector<Level*> levels) {
    route = std::move(levels);
    std::vector<Route::Step> steps;
    for (Level* level : route) steps.push_back({level, 1});
    scheduler = std::make_unique<Scheduler>(steps, config.pipeline, pool, catalog, log, trace);
  }
  void stop() {
    gated.open_gate();  // a failed expectation must not leave the worker held
    scheduler.reset();
  }
  const std::vector<std::byte>& state(int version) {
    std::vector<std::byte>& bytes = states.at(static_cast<std::size_t>(version));
    if (bytes.empty()) {
      bytes.resize(kMiB + kMiB / 4);
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 131 + version * 37) & 0xff);
    }
    return bytes;
  }
  // `on_caller`: written into the memory level on the caller's thread, as a
  // small version's copy capture does.
  void take(int version, bool on_caller = false) {
    catalog.add(version, Clock::now(), level_numbers(route), VersionStats{});
    Snapshot snapshot = testing::full_version(kStore, version, state(version));
    snapshot.synchronous = on_caller;
    snapshot.into_memory_level = on_caller;
    scheduler->submit(version, route, std::move(snapshot));
  }
  double backpressure(int version) {
    for (const VersionStats& stats : catalog.stats()) {
      if (stats.version == version) return stats.backpressure_seconds;
    }
    ADD_FAILURE() << "no stats for version " << version;
    return -1;
  }
  void expect_bit_for_bit(int version) {
    EXPECT_EQ(catalog.outcome(version, kL2), 1) << "version " << version << " did not reach L2";
    EXPECT_TRUE(read_file(l2.path(version)) == container_of(version, state(version), config))
        << "version " << version << " differs on L2";
  }

  TempDir dir;
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
  DirectoryLevel l2{kL2, dir.path(), kStore, 0, 0600, 0, env};
  GatedLevel gated{l2};
  std::vector<Level*> route;
  std::vector<std::vector<std::byte>> states = std::vector<std::vector<std::byte>>(16);
  Config config;
  ThreadPool pool{1};
  Catalog catalog{kStore};
  const Logger log{kStore, LogLevel::kOff};
  Trace trace{""};
  std::unique_ptr<Scheduler> scheduler;
};

TEST(GroupCommitTest, QueuedVersionsAreCommittedAsOneGroupAndEachReadsBackBitForBit) {
  Pipeline pipeline;
  pipeline.start({&pipeline.gated});
  pipeline.take(1);
  pipeline.gated.wait_until_held();
  for (int version = 2; version <= 6; ++version) pipeline.take(version);
  pipeline.gated.open_gate();
  pipeline.scheduler->drain();
  EXPECT_EQ(pipeline.gated.groups(), std::vector<std::size_t>{5}) << "versions 2 to 6 waited together";
  for (int version = 1; version <= 6; ++version) pipeline.expect_bit_for_bit(version);
  EXPECT_EQ(pipeline.l2.versions(), (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

TEST(GroupCommitTest, AnIoFaultInOneFileOfAGroupFailsThatVersionOnly) {
  Pipeline pipeline;
  pipeline.start({&pipeline.gated});
  pipeline.env->inject({FaultEnv::Op::kSync, EIO, format::container_file_name(4, 0), 0, 1, false});
  pipeline.take(1);
  pipeline.gated.wait_until_held();
  for (int version = 2; version <= 6; ++version) pipeline.take(version);
  pipeline.gated.open_gate();
  pipeline.scheduler->drain();
  EXPECT_EQ(pipeline.env->failures(), 1);
  EXPECT_EQ(pipeline.gated.groups(), std::vector<std::size_t>{5});
  EXPECT_EQ(pipeline.catalog.outcome(4, kL2), -1) << "the version whose fdatasync failed";
  for (int version : {1, 2, 3, 5, 6}) pipeline.expect_bit_for_bit(version);
  EXPECT_EQ(pipeline.l2.versions(), (std::vector<int>{1, 2, 3, 5, 6}));
}

// Memory + L2: the memory level holds 4 versions (of 1.25 MiB each, in 6 MiB).
struct MemoryThenL2 : Pipeline {
  MemoryThenL2() { start({&memory, &gated}); }
  ~MemoryThenL2() { stop(); }  // before the memory level goes
  // Takes `versions` on another thread: true when they all returned within
  // a few seconds while L2 stayed held.
  bool burst_returns(int first, int last) {
    std::future<void> burst = std::async(std::launch::async, [&] {
      for (int version = first; version <= last; ++version) take(version, true);
    });
    const bool returned = burst.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    gated.open_gate();
    burst.get();
    return returned;
  }

  MemoryLevel memory{kStore, 0, 6 * kMiB, 1};
};

TEST(GroupCommitTest, ABurstOfSmallVersionsRestsInMemoryWithoutWaitingForL2) {
  MemoryThenL2 pipeline;
  pipeline.take(1, true);
  pipeline.gated.wait_until_held();  // L2 copies version 1 and is held there
  EXPECT_TRUE(pipeline.burst_returns(2, 4)) << "checkpoints waited for L2 with room left in memory";
  pipeline.scheduler->drain();
  for (int version = 1; version <= 4; ++version) {
    EXPECT_EQ(pipeline.backpressure(version), 0.0) << "version " << version;
    pipeline.expect_bit_for_bit(version);
  }
  EXPECT_EQ(pipeline.gated.groups(), std::vector<std::size_t>{3}) << "L2 caught up in one group";
}

TEST(GroupCommitTest, AVersionWaitsForL2OnlyOnceTheMemoryLevelIsFullOfVersionsWaitingForIt) {
  MemoryThenL2 pipeline;
  pipeline.take(1, true);
  pipeline.gated.wait_until_held();
  std::future<void> burst = std::async(std::launch::async, [&] {
    for (int version = 2; version <= 6; ++version) pipeline.take(version, true);
  });
  // Versions 1 to 4 fill the memory level; version 5 waits for L2.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pipeline.memory.versions().size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(burst.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  pipeline.gated.open_gate();
  burst.get();
  pipeline.scheduler->drain();
  for (int version = 1; version <= 6; ++version) pipeline.expect_bit_for_bit(version);
  // Counted as backpressure, which the scheduler records only for a wait
  // for a copy to L2. No bound on how long: that depends on when the
  // burst's thread reached version 5 after version 4 landed. Under TSan on
  // the 2-core VM its wait was once 92 ms of the 200 ms that L2 is held
  // here, against a bound of 100 ms (bench/ci_time.sh, 2026-11-29).
  EXPECT_GT(pipeline.backpressure(5), 0.0) << "the wait for L2 is backpressure";
  for (int version = 1; version <= 4; ++version) EXPECT_EQ(pipeline.backpressure(version), 0.0) << version;
  EXPECT_EQ(pipeline.catalog.failure_count(), 0);
}

}  // namespace
}  // namespace resurgo
