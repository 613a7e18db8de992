// Compaction of delta chains (docs/tracking.md, "Compaction"): a version
// whose chain on L2 or L4 holds more than delta.compact_after deltas is
// rewritten there as a full version in the background. Restart then reads
// one file, with the same bytes; eviction and discards drop the old links;
// an I/O fault leaves the delta as it was; no compaction starts while a
// capture runs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "core/catalog.h"
#include "format/container.h"
#include "format/file_names.h"
#include "io/fault_env.h"
#include "pipeline/scheduler.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

constexpr std::size_t kBlock = 4096;
constexpr std::size_t kBlocks = 64;
constexpr std::size_t kChunk = 64 * 1024;
const char* const kStoreName = "c";

format::Header header_of(const std::string& path) {
  return format::read_container(*Env::posix()->open(path)).header;
}

// The versions whose files lie in `directory`.
std::set<int> versions_in(const std::string& directory) {
  std::set<int> versions;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    int version = 0;
    int rank = 0;
    if (format::parse_container_file_name(entry.path().filename().string(), version, rank)) versions.insert(version);
  }
  return versions;
}

class CompactionTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.path", dir.path() + "/l4"},
                                               {"persistent.every", "0"},
                                               {"local.keep", "0"},
                                               {"capture.mode", "delta"},
                                               {"track.method", "hash"},
                                               {"track.granularity", std::to_string(kBlock)},
                                               {"delta.full_every", "100"},
                                               {"delta.compact_after", "3"},
                                               {"pipeline.chunk_size", "64KiB"},
                                               {"log.level", "off"}};
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  Store open(const Config& store_config, std::shared_ptr<Env> env = nullptr) {
    Store store(kStoreName, store_config, std::move(env));
    store.protect(0, state.data(), state.size(), "state");
    return store;
  }
  // Writes two blocks of the state, then checkpoints `version` and waits for L2.
  void take(Store& store, int version) {
    for (std::size_t block : {static_cast<std::size_t>(version) % kBlocks, (7 * version + 3) % kBlocks}) {
      std::memset(state.data() + block * kBlock + 16, version, 100);
    }
    store.checkpoint(version);
    saved[version] = state;
    store.wait(version, kL2);
  }
  void take_versions(const Config& store_config, int count) {
    Store store = open(store_config);
    for (int version = 1; version <= count; ++version) take(store, version);
  }  // closing drains the scheduler: every compaction is done
  // Restarts `version` in a store opened anew; checks its bytes.
  RestartReport restart(int version, const Config& store_config) {
    Store store = open(store_config);
    std::fill(state.begin(), state.end(), std::byte{0});
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(state == saved.at(version)) << "version " << version << " restored other bytes";
    return store.last_restart();
  }
  std::string level_dir(const char* level = "l2") const { return dir.path() + "/" + level + "/" + kStoreName; }
  std::string file(int version, const char* level = "l2") const {
    return level_dir(level) + "/" + format::container_file_name(version, 0);
  }

  TempDir dir;
  std::vector<std::byte> state = std::vector<std::byte>(kBlocks * kBlock, std::byte{1});
  std::map<int, std::vector<std::byte>> saved;
};

TEST_F(CompactionTest, WithoutCompactionRestartReadsTheWholeChain) {
  take_versions(config({{"delta.compact_after", "0"}}), 5);
  EXPECT_EQ(header_of(file(5)).base_version, 4);
  EXPECT_EQ(restart(5, config()).chain, (std::vector<int>{5, 4, 3, 2, 1}));
}

TEST_F(CompactionTest, AChainLongerThanCompactAfterIsRewrittenAsOneFullVersion) {
  take_versions(config(), 6);
  EXPECT_EQ(header_of(file(4)).base_version, 3) << "a chain of 3 deltas is not longer than compact_after";
  const format::Header compacted = header_of(file(5));
  EXPECT_EQ(compacted.base_version, -1);
  EXPECT_EQ(compacted.version, 5);
  EXPECT_EQ(restart(5, config()).chain, std::vector<int>{5});
  EXPECT_EQ(restart(4, config()).chain, (std::vector<int>{4, 3, 2, 1}));
  // The next delta builds on the compacted version as on the delta it was.
  EXPECT_EQ(restart(6, config()).chain, (std::vector<int>{6, 5}));
}

TEST_F(CompactionTest, EvictionThenDropsTheOldLinks) {
  take_versions(config({{"local.keep", "1"}}), 5);
  EXPECT_EQ(versions_in(level_dir()), std::set<int>{5});
  EXPECT_EQ(restart(5, config()).chain, std::vector<int>{5});
}

// L4 copies are compacted on their own level, and eviction there keeps a
// delta's base until its own copy is full: the catalog knows bases per level.
TEST_F(CompactionTest, BothDirectoryLevelsCompactTheirOwnCopies) {
  const Config both = config({{"local.keep", "1"}, {"persistent.every", "1"}, {"persistent.keep", "1"}});
  take_versions(both, 5);
  EXPECT_EQ(versions_in(level_dir("l4")), std::set<int>{5});
  EXPECT_EQ(header_of(file(5, "l4")).base_version, -1);
  std::filesystem::remove_all(dir.path() + "/l2");
  const RestartReport report = restart(5, both);
  EXPECT_EQ(report.level, kL4);
  EXPECT_EQ(report.chain, std::vector<int>{5});
}

TEST_F(CompactionTest, DiscardedLinksOfACompactedChainAreRemoved) {
  const Config compact_after_two = config({{"delta.compact_after", "2"}});
  {
    Store store = open(compact_after_two);
    for (int version = 1; version <= 4; ++version) take(store, version);
    for (int version = 1; version <= 3; ++version) store.discard(version);
  }
  EXPECT_EQ(versions_in(level_dir()), std::set<int>{4});
  EXPECT_EQ(restart(4, compact_after_two).chain, std::vector<int>{4});
}

// A discarded version stays while a newer delta builds on it. Whether it is
// compacted first depends on the order the background work runs in: either
// it is, and version 6 (its delta) keeps it, or it is not (discarded: not
// worth compacting), and version 6 is compacted in its place and needs it no more.
TEST_F(CompactionTest, ADiscardedVersionStaysWhileANewerDeltaBuildsOnIt) {
  {
    Store store = open(config());
    for (int version = 1; version <= 6; ++version) take(store, version);
    store.discard(5);
  }
  const std::set<int> held = versions_in(level_dir());
  EXPECT_TRUE(held.count(6));
  EXPECT_EQ(held.count(5) == 1, header_of(file(6)).base_version == 5);
  const RestartReport report = restart(6, config());
  EXPECT_EQ(report.chain.back(), held.count(5) ? 5 : 6);
}

TEST_F(CompactionTest, AnIoFaultDuringCompactionLeavesTheDeltaIntact) {
  auto env = std::make_shared<FaultEnv>();
  // The first rename onto version 5's name commits it; the second would
  // commit its compaction.
  env->inject({FaultEnv::Op::kRename, EIO, format::container_file_name(5, 0), 1, 1});
  {
    Store store = open(config(), env);
    for (int version = 1; version <= 5; ++version) take(store, version);
    store.close();  // drains: the compaction ran and failed
  }
  EXPECT_EQ(env->failures(), 1) << "the compaction's commit was not reached";
  EXPECT_EQ(header_of(file(5)).base_version, 4);
  EXPECT_EQ(versions_in(level_dir()), (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(restart(5, config()).chain, (std::vector<int>{5, 4, 3, 2, 1}));
}

// The compaction's rename replaced a committed delta with a complete full
// version of the same number: a failed directory sync after it must leave
// that file (either entry is the version whole), not remove the version
// from the level as a failed first commit of a version does.
TEST_F(CompactionTest, AFailedDirectorySyncAfterTheRenameKeepsTheVersion) {
  int syncs = 0;
  {
    auto counting = std::make_shared<FaultEnv>();
    Store store = open(config(), counting);
    for (int version = 1; version <= 5; ++version) take(store, version);
    store.close();
    syncs = counting->calls(FaultEnv::Op::kSyncDir);
  }
  ASSERT_EQ(header_of(file(5)).base_version, -1) << "version 5 was not compacted";
  std::filesystem::remove_all(dir.path() + "/l2");
  auto env = std::make_shared<FaultEnv>();
  env->inject({FaultEnv::Op::kSyncDir, EIO, "", syncs - 1, 1});  // the last one: the compaction's
  {
    Store store = open(config(), env);
    for (int version = 1; version <= 5; ++version) take(store, version);
    store.close();
  }
  EXPECT_EQ(env->failures(), 1);
  EXPECT_EQ(versions_in(level_dir()), (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(restart(5, config()).chain, (std::vector<int>{5}));
}

TEST(CompactionConfigTest, CompactAfterIsOffByDefaultAndBounded) {
  Config c;
  EXPECT_EQ(c.delta.compact_after, 0);
  c.set("delta.compact_after", "4");
  EXPECT_EQ(c.delta.compact_after, 4);
  EXPECT_THROW(c.set("delta.compact_after", "-1"), ConfigError);
}

// ---------------------------------------------------- the Scheduler alone

// Version 1 full, each later one a delta of its predecessor that rewrites
// one block; one region of kBlocks blocks.
struct HandMadeChain {
  Snapshot snapshot(int version) {
    if (version > 1) {
      states[version] = states[version - 1];
      std::memset(states[version].data() + version * kBlock, version, kBlock);
    }
    Snapshot snapshot;
    snapshot.header.store = kStoreName;
    snapshot.header.version = version;
    snapshot.header.base_version = version > 1 ? version - 1 : -1;
    snapshot.header.chunk_size = kChunk;
    format::RegionEntry region;
    region.label = "state";
    region.bytes = kBlocks * kBlock;
    snapshot.header.regions.push_back(region);
    const std::byte* bytes = states[version].data();
    snapshot.extents.push_back(version > 1 ? Extent{0, version * kBlock, kBlock, bytes + version * kBlock}
                                           : Extent{0, 0, kBlocks * kBlock, bytes});
    return snapshot;
  }
  std::vector<std::vector<std::byte>> states = std::vector<std::vector<std::byte>>(
      8, std::vector<std::byte>(kBlocks * kBlock, std::byte{5}));
};

std::vector<std::byte> bytes_of_full_version(Level& level, int version) {
  const std::unique_ptr<ReadableFile> file = level.open(version);
  const format::Container container = format::read_container(*file);
  std::vector<std::byte> bytes(container.header.regions.at(0).bytes);
  std::vector<std::byte> scratch;
  for (const format::ChunkRecord& chunk : container.chunks) {
    format::read_chunk(*file, container, chunk, bytes.data() + chunk.offset, scratch);
  }
  return bytes;
}

TEST(CompactionSchedulerTest, NoCompactionRunsWhileACaptureIsInFlight) {
  TempDir dir;
  DirectoryLevel level(kL2, dir.path(), kStoreName, 0, 0600, 0, Env::posix());
  level.prepare();
  Config config;
  config.delta.compact_after = 2;
  config.pipeline.chunk_size = kChunk;
  ThreadPool pool{1};
  Catalog catalog{kStoreName};
  const Logger log{kStoreName, LogLevel::kOff};
  Trace trace{""};
  HandMadeChain chain;
  Scheduler scheduler{{{&level, 1}}, config.pipeline, pool, catalog, log, trace, config.delta};

  scheduler.set_capturing(true);
  for (int version = 1; version <= 4; ++version) {
    VersionStats stats;
    stats.base_version = version > 1 ? version - 1 : -1;
    catalog.add(version, Clock::now(), {kL2}, stats);
    scheduler.submit(version, {&level}, chain.snapshot(version));
    catalog.wait_settled(version, kL2);
    ASSERT_EQ(catalog.outcome(version, kL2), 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(level.base_of(4), 3) << "compacted while a capture was in flight";

  scheduler.set_capturing(false);
  scheduler.drain();
  EXPECT_EQ(level.base_of(4), std::nullopt);
  EXPECT_EQ(catalog.base_of(4, kL2), -1);
  EXPECT_EQ(catalog.base_of(4, kL4), 3) << "a copy elsewhere is still the delta";
  EXPECT_TRUE(bytes_of_full_version(level, 4) == chain.states[4]);
}

}  // namespace
}  // namespace resurgo
