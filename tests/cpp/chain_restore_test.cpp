// Restart from chains of delta versions: bit-exact results, no chunk read
// that newer links hold whole, fallback past broken chains (missing base,
// base damaged everywhere, region tables that differ), repair of a damaged
// link from another level, and the unreadable-copy rule. The files are
// written through ContainerWriter (chain_files.h) into the store's levels.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "chain_files.h"
#include "format/file_names.h"
#include "base/byte_ranges.h"
#include "format/container.h"
#include "io/fault_env.h"
#include "forwarding_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

// Forwards to the POSIX Env and records every read of every file opened.
class CountingEnv final : public ForwardingEnv {
 public:
  struct Read {
    std::string path;
    std::uint64_t offset;
    std::uint64_t bytes;
  };

  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    return std::make_unique<CountingFile>(base_->open(path), *this);
  }

  std::vector<Read> take_reads() {
    std::lock_guard lock(mutex_);
    return std::exchange(reads_, {});
  }

 private:
  class CountingFile final : public ReadableFile {
   public:
    CountingFile(std::unique_ptr<ReadableFile> file, CountingEnv& env) : file_(std::move(file)), env_(env) {}
    void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
      {
        std::lock_guard lock(env_.mutex_);
        env_.reads_.push_back({file_->path(), offset, bytes});
      }
      file_->read_at(offset, data, bytes);
    }
    std::uint64_t size() const override { return file_->size(); }
    const std::string& path() const override { return file_->path(); }

   private:
    std::unique_ptr<ReadableFile> file_;
    CountingEnv& env_;
  };

  std::mutex mutex_;
  std::vector<Read> reads_;
};

format::Container container_at(const std::string& path) { return format::read_container(*Env::posix()->open(path)); }

// (version, offset) of every chunk of `chain` (newest first, L2 paths) whose
// stored bytes some read touched.
std::set<std::pair<int, std::uint64_t>> chunks_read(const std::vector<std::pair<int, std::string>>& chain,
                                                    const std::vector<CountingEnv::Read>& reads) {
  std::set<std::pair<int, std::uint64_t>> found;
  for (const auto& [version, path] : chain) {
    for (const format::ChunkRecord& chunk : container_at(path).chunks) {
      for (const CountingEnv::Read& read : reads) {
        const bool touches = read.path == path && read.offset < chunk.file_offset + chunk.stored_length &&
                             chunk.file_offset < read.offset + read.bytes;
        if (touches) found.insert({version, chunk.offset});
      }
    }
  }
  return found;
}

// The chunks a reader that never reads what newer links hold whole must
// read, worked out byte by byte (one region).
std::set<std::pair<int, std::uint64_t>> chunks_needed(const std::vector<std::pair<int, std::string>>& chain,
                                                      std::uint64_t region_bytes) {
  std::vector<bool> held(region_bytes, false);
  std::set<std::pair<int, std::uint64_t>> needed;
  for (const auto& [version, path] : chain) {
    const format::Container container = container_at(path);
    for (const format::ChunkRecord& chunk : container.chunks) {
      for (std::uint64_t i = chunk.offset; i < chunk.offset + chunk.raw_length; ++i) {
        if (!held[i]) {
          needed.insert({version, chunk.offset});
          break;
        }
      }
    }
    for (const format::ChunkRecord& chunk : container.chunks) {
      std::fill(held.begin() + static_cast<std::ptrdiff_t>(chunk.offset),
                held.begin() + static_cast<std::ptrdiff_t>(chunk.offset + chunk.raw_length), true);
    }
  }
  return needed;
}

class ChainRestoreTest : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kBlock = 4096;
  static constexpr std::uint64_t kRegionBytes = 64 * kBlock;

  Config config() const {
    return Config::load("", {{"local.path", dir_.path() + "/l2"},
                             {"persistent.path", dir_.path() + "/l4"},
                             {"local.keep", "0"},
                             {"persistent.keep", "0"},
                             {"log.level", "off"}});
  }
  std::string path(int level, int version) const {
    return dir_.path() + (level == 2 ? "/l2/s/" : "/l4/s/") + format::container_file_name(version, 0);
  }
  // Writes `version` to each of `levels` and records it in the model.
  void write(int version, int base, const std::vector<Extent>& extents, std::vector<int> levels = {2, 4},
             const std::vector<format::RegionEntry>* regions = nullptr) {
    for (int level : levels) {
      DirectoryLevel tier(level, dir_.path() + (level == 2 ? "/l2" : "/l4"), "s", 0, 0600, 0, Env::posix());
      tier.prepare();
      tier.adopt_identity(store_id_);
      tier.commit(version,
                  chain_file("s", version, base, regions ? *regions : model_.regions(), extents, kBlock, store_id_));
    }
    if (regions == nullptr) model_.add(version, base, extents);
  }
  // A store protecting a zeroed `u` like the files' region table.
  std::unique_ptr<Store> open(std::shared_ptr<Env> env = nullptr) {
    std::fill(u_.begin(), u_.end(), std::byte{0});
    auto store = std::make_unique<Store>("s", config(), std::move(env));
    store->protect(0, u_.data(), u_.size(), "u");
    return store;
  }
  void flip_chunk_byte(const std::string& file) {
    flip_bit(file, container_at(file).chunks.at(0).file_offset + 1);
  }
  static bool mentions(const std::vector<std::string>& lines, const std::string& text) {
    const auto has = [&](const std::string& line) { return line.find(text) != std::string::npos; };
    return std::any_of(lines.begin(), lines.end(), has);
  }

  TempDir dir_;
  const format::StoreId store_id_ = format::StoreId::random();
  ChainModel model_{{format::RegionEntry{0, "u", format::RegionKind::kHost, kRegionBytes, "", {}}}};
  std::vector<std::byte> u_ = std::vector<std::byte>(kRegionBytes);
};

TEST(ByteRangesTest, ClaimSaysHowMuchOfEachRangeWasClaimedBefore) {
  using Held = ByteRanges::Held;
  ByteRanges ranges;
  EXPECT_EQ(ranges.claim({{100, 200}, {300, 400}}), (std::vector<Held>{Held::kNone, Held::kNone}));
  EXPECT_EQ(ranges.range_count(), 2u);
  EXPECT_EQ(ranges.claim({{50, 100}, {120, 180}, {190, 310}, {400, 450}}),
            (std::vector<Held>{Held::kNone, Held::kAll, Held::kPart, Held::kNone}));
  EXPECT_EQ(ranges.range_count(), 1u);  // 50..450: adjacent ranges joined
  EXPECT_EQ(ranges.claim({{0, 10}, {40, 460}, {460, 470}}), (std::vector<Held>{Held::kNone, Held::kPart, Held::kNone}));
  EXPECT_EQ(ranges.range_count(), 2u);  // 0..10 and 40..470
  EXPECT_EQ(ranges.claim({{0, 500}}), (std::vector<Held>{Held::kPart}));
  EXPECT_EQ(ranges.claim({{5, 5}, {10, 20}}), (std::vector<Held>{Held::kAll, Held::kAll}));  // empty: nothing to read
  EXPECT_EQ(ranges.range_count(), 1u);
}

TEST_F(ChainRestoreTest, TenDeltaChainIsBitExactAndReadsNoChunkNewerLinksHold) {
  write(0, -1, {}, {2});
  std::mt19937 random(12345);
  for (int version = 1; version <= 10; ++version) {
    std::set<std::uint64_t> blocks;
    while (blocks.size() < 8) blocks.insert(random() % (kRegionBytes / kBlock));
    std::vector<Extent> extents;
    for (std::uint64_t block : blocks) {
      if (!extents.empty() && extents.back().offset + extents.back().bytes == block * kBlock) {
        extents.back().bytes += kBlock;  // one extent of several chunks
      } else {
        extents.push_back({0, block * kBlock, kBlock});
      }
    }
    write(version, version - 1, extents, {2});
  }
  std::vector<std::pair<int, std::string>> chain;
  for (int version = 10; version >= 0; --version) chain.emplace_back(version, path(2, version));

  const auto env = std::make_shared<CountingEnv>();
  const auto store = open(env);
  env->take_reads();
  EXPECT_EQ(store->restart(), 10);
  EXPECT_EQ(u_, model_.region(10, 0));
  EXPECT_EQ(store->last_restart().chain, (std::vector<int>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(store->last_restart().level, 2);
  EXPECT_EQ(store->last_restart().bytes, kRegionBytes);
  EXPECT_TRUE(store->last_restart().skipped.empty());
  const std::vector<std::byte> expected_metadata = {std::byte{'v'}, std::byte{'e'}, std::byte{'r'}, std::byte{'s'},
                                                    std::byte{'i'}, std::byte{'o'}, std::byte{'n'}, std::byte{' '},
                                                    std::byte{'1'}, std::byte{'0'}};
  EXPECT_EQ(store->metadata(), expected_metadata);  // the newest link's

  const auto read = chunks_read(chain, env->take_reads());
  const auto needed = chunks_needed(chain, kRegionBytes);
  EXPECT_EQ(read, needed);
  std::size_t all = 0;
  for (const auto& [version, file] : chain) all += container_at(file).chunks.size();
  EXPECT_LT(needed.size(), all - 40);  // most of the full version's chunks are held by the deltas
}

TEST_F(ChainRestoreTest, PartlyHeldChunksAreReadOnceBeforeNewerLinksOverwriteTheirPart) {
  write(0, -1, {}, {2});
  write(1, 0, {{0, 1000, 2000}, {0, 3000, 2000}}, {2});             // inside and across v0's first chunks
  write(2, 1, {{0, 2000, 500}, {0, kBlock, kBlock + 100}}, {2});  // holds v0's second chunk whole
  const std::vector<std::pair<int, std::string>> chain = {{2, path(2, 2)}, {1, path(2, 1)}, {0, path(2, 0)}};

  const auto env = std::make_shared<CountingEnv>();
  const auto store = open(env);
  env->take_reads();
  EXPECT_EQ(store->restart(), 2);
  EXPECT_EQ(u_, model_.region(2, 0));
  const auto read = chunks_read(chain, env->take_reads());
  EXPECT_EQ(read, chunks_needed(chain, kRegionBytes));
  EXPECT_EQ(read.count({0, kBlock}), 0u);
  EXPECT_EQ(read.count({0, 0}), 1u);     // partly held by versions 1 and 2
  EXPECT_EQ(read.count({1, 3000}), 1u);  // partly held by version 2
}

// Extents of any size and alignment, so that chunks of several links hold
// parts of one another at every depth of the chain: each link's partly held
// chunks must land before every newer link's.
TEST_F(ChainRestoreTest, ChainsOfUnalignedOverlappingDeltasAreBitExact) {
  std::mt19937 random(2026);
  for (int round = 0; round < 5; ++round) {
    const int first = round * 20;
    write(first, -1, {}, {2});
    for (int version = first + 1; version <= first + 12; ++version) {
      std::vector<Extent> extents;
      for (std::uint64_t at = random() % 3000; at < kRegionBytes;) {
        const std::uint64_t bytes = std::min<std::uint64_t>(1 + random() % (3 * kBlock), kRegionBytes - at);
        extents.push_back({0, at, bytes});
        at += bytes + 1 + random() % (6 * kBlock);
      }
      write(version, version - 1, extents, {2});
    }
    std::vector<std::pair<int, std::string>> chain;
    for (int version = first + 12; version >= first; --version) chain.emplace_back(version, path(2, version));

    const auto env = std::make_shared<CountingEnv>();
    const auto store = open(env);
    env->take_reads();
    EXPECT_EQ(store->restart(), first + 12);
    EXPECT_EQ(u_, model_.region(first + 12, 0)) << "round " << round;
    EXPECT_EQ(chunks_read(chain, env->take_reads()), chunks_needed(chain, kRegionBytes)) << "round " << round;
  }
}

TEST_F(ChainRestoreTest, DeltaWithoutChunksRestoresItsBase) {
  write(0, -1, {}, {2});
  write(1, 0, {}, {2});
  const auto store = open();
  EXPECT_EQ(store->restart(), 1);
  EXPECT_EQ(u_, model_.region(0, 0));
  EXPECT_EQ(store->last_restart().chain, (std::vector<int>{1, 0}));
}

TEST_F(ChainRestoreTest, MissingBaseFallsBackAndNamesTheBase) {
  write(0, -1, {});
  write(1, 0, {{0, 0, kBlock}});
  write(2, -1, {});
  write(3, 2, {{0, kBlock, kBlock}});
  write(4, 3, {{0, 2 * kBlock, kBlock}});
  fs::remove(path(2, 3));  // deleted by hand on every level
  fs::remove(path(4, 3));
  {
    const auto store = open();
    try {
      store->restart(4);
      ADD_FAILURE() << "restart(4) without its base succeeded";
    } catch (const NotFoundError& error) {
      EXPECT_NE(std::string(error.what()).find("its base 3 is missing"), std::string::npos) << error.what();
    }
  }
  const auto store = open();
  EXPECT_EQ(store->restart(), 2);
  EXPECT_EQ(u_, model_.region(2, 0));
  EXPECT_EQ(store->last_restart().chain, std::vector<int>{2});
  const auto& skipped = store->last_restart().skipped;
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("version 4 skipped: its base 3 is missing"), std::string::npos) << skipped[0];
  EXPECT_TRUE(fs::exists(path(2, 4)));  // intact, only unusable
}

TEST_F(ChainRestoreTest, DamagedBaseAtL2IsReadFromL4AndRepaired) {
  write(0, -1, {});
  write(1, 0, {{0, 0, 3 * kBlock}});
  write(2, 1, {{0, 10 * kBlock, kBlock}});
  write(3, 2, {{0, 20 * kBlock, kBlock}});
  flip_chunk_byte(path(2, 1));
  const auto store = open();
  EXPECT_EQ(store->restart(), 3);
  EXPECT_EQ(u_, model_.region(3, 0));
  const RestartReport report = store->last_restart();
  EXPECT_EQ(report.chain, (std::vector<int>{3, 2, 1, 0}));
  ASSERT_EQ(report.skipped.size(), 1u);
  EXPECT_NE(report.skipped[0].find("version 1 at L2"), std::string::npos) << report.skipped[0];
  EXPECT_NE(report.skipped[0].find(path(2, 1)), std::string::npos) << report.skipped[0];
  EXPECT_EQ(read_file(path(2, 1)), read_file(path(4, 1)));  // repaired
}

TEST_F(ChainRestoreTest, BaseDamagedEverywhereFallsBackToTheNewestIntactChain) {
  write(0, -1, {});
  write(1, 0, {{0, 0, kBlock}});
  write(2, -1, {});
  write(3, 2, {{0, kBlock, kBlock}});
  write(4, 3, {{0, 2 * kBlock, kBlock}});
  flip_chunk_byte(path(2, 2));
  flip_chunk_byte(path(4, 2));
  {
    const auto store = open();
    EXPECT_THROW(store->restart(4), CorruptionError);
    EXPECT_TRUE(fs::exists(path(2, 2)));  // not quarantined on an explicit request
  }
  const auto store = open();
  EXPECT_EQ(store->restart(), 1);
  EXPECT_EQ(u_, model_.region(1, 0));
  const RestartReport report = store->last_restart();
  EXPECT_EQ(report.chain, (std::vector<int>{1, 0}));
  EXPECT_TRUE(mentions(report.skipped, "version 4 skipped: its base 2 is damaged"))
      << ::testing::PrintToString(report.skipped);
  EXPECT_TRUE(mentions(report.skipped, "version 3 skipped: its base 2 is damaged"));
  EXPECT_TRUE(mentions(report.skipped, path(4, 2)));
  // The damaged base is set aside; its intact deltas stay.
  EXPECT_TRUE(fs::exists(path(2, 2) + ".damaged"));
  EXPECT_TRUE(fs::exists(path(4, 2) + ".damaged"));
  EXPECT_TRUE(fs::exists(path(2, 4)));
  EXPECT_TRUE(fs::exists(path(4, 3)));
}

TEST_F(ChainRestoreTest, RegionTableOtherThanTheBaseBreaksTheChain) {
  write(0, -1, {});
  const std::vector<format::RegionEntry> other = {
      format::RegionEntry{0, "u", format::RegionKind::kHost, kRegionBytes, "float64", {kRegionBytes / 8}}};
  write(1, 0, {{0, 0, kBlock}}, {2, 4}, &other);
  {
    const auto store = open();
    try {
      store->restart(1);
      ADD_FAILURE() << "restart(1) with another region table than its base succeeded";
    } catch (const CorruptionError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("version 1 is a delta of version 0 but their region tables differ"), std::string::npos)
          << message;
    }
  }
  const auto store = open();
  EXPECT_EQ(store->restart(), 0);
  EXPECT_EQ(u_, model_.region(0, 0));
  EXPECT_TRUE(mentions(store->last_restart().skipped, "region tables differ"));
}

TEST_F(ChainRestoreTest, UnreadableBaseIsAStorageErrorWithoutRollBack) {
  write(0, -1, {});
  write(1, 0, {{0, 0, kBlock}});
  write(2, 1, {{0, kBlock, kBlock}});
  const auto env = std::make_shared<FaultEnv>();
  const auto store = open(env);
  env->inject({FaultEnv::Op::kOpen, EIO, format::container_file_name(1, 0), 0, -1});
  EXPECT_THROW(store->restart(), StorageError);
  EXPECT_TRUE(fs::exists(path(2, 1)));
  EXPECT_TRUE(fs::exists(path(4, 1)));
  EXPECT_TRUE(fs::exists(path(2, 2)));
  env->clear();
  EXPECT_EQ(store->restart(), 2);
  EXPECT_EQ(u_, model_.region(2, 0));
}

}  // namespace
}  // namespace resurgo
