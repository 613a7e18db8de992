// Compaction that streams (pipeline/compactor.h, format/chain_merge.h): a
// chain is merged one output chunk at a time while its full version is
// written. The compacted version must restore to exactly the chain's bytes
// whatever the output chunks' size against the links' (output chunks that
// end inside a region or at its odd end, links whose chunks are larger,
// smaller or not aligned with them, compressed links); each link's chunk is
// read once; and a damaged link or a failed call in the middle leaves the
// delta as it was, with no temporary and nothing committed.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/thread_pool.h"
#include "format/chain_merge.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/version_writer.h"
#include "io/fault_env.h"
#include "pipeline/compactor.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

const char* const kStore = "s";
// Odd sizes: output chunks end inside regions and at their odd ends; the
// empty region has no chunk at all.
const std::vector<std::uint64_t> kRegionBytes = {300001, 65536, 0, 1, 135168};

using State = std::vector<std::vector<std::byte>>;  // per region

std::vector<std::byte> random_bytes(std::mt19937_64& random, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  // Runs of a repeated value: compressible, so compressed links are tried.
  for (std::size_t i = 0; i < bytes;) {
    const std::size_t run = std::min<std::size_t>(bytes - i, 1 + random() % 64);
    std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(i), run, static_cast<std::byte>(random()));
    i += run;
  }
  return out;
}

// A chain on one directory level: version 1 full, each later one a delta of
// its predecessor over scattered extents of every size; `state` the bytes
// of the newest version, as the chain's model.
class Chain {
 public:
  explicit Chain(std::shared_ptr<Env> env = Env::posix())
      : level_(kL2, dir_.path(), kStore, 0, 0600, 0, std::move(env)) {
    level_.prepare();
  }

  void add_full(std::uint64_t chunk_size, Codec codec = Codec::kNone) {
    for (std::uint64_t bytes : kRegionBytes) state_.push_back(random_bytes(random_, bytes));
    std::vector<Extent> extents;
    for (std::uint32_t r = 0; r < state_.size(); ++r) {
      if (!state_[r].empty()) extents.push_back({r, 0, state_[r].size(), state_[r].data()});
    }
    write(extents, chunk_size, codec);
  }

  // Extents of 1 byte to 100 KB, ascending and disjoint in each region.
  void add_delta(std::uint64_t chunk_size, Codec codec = Codec::kNone) {
    std::vector<std::vector<std::byte>> bytes;  // the extents' sources, kept until written
    std::vector<Extent> extents;
    for (std::uint32_t r = 0; r < state_.size(); ++r) {
      for (std::uint64_t at = random_() % 5000; at < state_[r].size(); at += random_() % 70000) {
        const std::uint64_t length = std::min<std::uint64_t>(state_[r].size() - at, 1 + random_() % 100000);
        bytes.push_back(random_bytes(random_, length));
        std::copy(bytes.back().begin(), bytes.back().end(), state_[r].begin() + static_cast<std::ptrdiff_t>(at));
        extents.push_back({r, at, length, bytes.back().data()});
        at += length;
      }
    }
    write(extents, chunk_size, codec);
  }

  format::Header header(int version, int base, std::uint64_t chunk_size) const {
    format::Header header;
    header.store = kStore;
    header.version = version;
    header.base_version = base;
    header.chunk_size = chunk_size;
    for (std::size_t r = 0; r < kRegionBytes.size(); ++r) {
      format::RegionEntry region;
      region.id = static_cast<std::int32_t>(r);
      region.label = "region " + std::to_string(r);
      region.bytes = kRegionBytes[r];
      header.regions.push_back(region);
    }
    return header;
  }

  // The bytes of `version`'s file here, which must be a full version.
  State restore_full(int version) {
    const std::unique_ptr<ReadableFile> file = level_.open(version);
    const format::Container container = format::read_container(*file);
    EXPECT_EQ(container.header.base_version, -1);
    State restored;
    for (const format::RegionEntry& region : container.header.regions) restored.emplace_back(region.bytes);
    std::vector<std::byte> scratch;
    for (const format::ChunkRecord& chunk : container.chunks) {
      format::read_chunk(*file, container, chunk, restored[chunk.region].data() + chunk.offset, scratch);
    }
    return restored;
  }

  std::string path(int version) const {
    return dir_.path() + "/" + kStore + "/" + format::container_file_name(version, 0);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/" + kStore)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  DirectoryLevel& level() { return level_; }
  const State& state() const { return state_; }
  int newest() const { return newest_; }

 private:
  void write(const std::vector<Extent>& extents, std::uint64_t chunk_size, Codec codec) {
    ++newest_;
    Config::Pipeline pipeline;
    pipeline.chunk_size = chunk_size;
    pipeline.compress = codec;
    ThreadPool pool(1);
    const format::Header version_header = header(newest_, newest_ == 1 ? -1 : newest_ - 1, chunk_size);
    level_.commit(newest_, [&](WritableFile& file) { write_extents(file, version_header, extents, pipeline, pool); });
  }

  TempDir dir_;
  DirectoryLevel level_;
  std::mt19937_64 random_{42};
  State state_;
  int newest_ = 0;
};

// No pauses: these tests are about what a compaction writes, not its pace.
Pacer& unpaced() {
  static Pacer pacer(1.0);
  return pacer;
}

Config::Pipeline output(std::uint64_t chunk_size, Codec codec = Codec::kNone) {
  Config::Pipeline pipeline;
  pipeline.chunk_size = chunk_size;
  pipeline.compress = codec;
  return pipeline;
}

// ------------------------------------------- bit-identical, any chunk sizes

struct Sizes {
  std::uint64_t full;    // the full version's chunks
  std::uint64_t delta;   // the deltas'
  std::uint64_t output;  // the compacted version's
  Codec links;           // the links' codec
};

class CompactionStreamSizes : public ::testing::TestWithParam<Sizes> {};

TEST_P(CompactionStreamSizes, TheCompactedVersionHoldsTheChainsBytes) {
  const Sizes sizes = GetParam();
  Chain chain;
  chain.add_full(sizes.full, sizes.links);
  for (int delta = 0; delta < 3; ++delta) chain.add_delta(delta == 1 ? sizes.output : sizes.delta, sizes.links);
  const Compaction done = compact_version(chain.level(), chain.newest(), 2, unpaced(), {}, output(sizes.output));
  EXPECT_TRUE(done.rewritten);
  EXPECT_EQ(done.deltas, 3);
  EXPECT_TRUE(chain.restore_full(chain.newest()) == chain.state()) << "the compacted version restores other bytes";
  const format::Container compacted = format::read_container(*chain.level().open(chain.newest()));
  EXPECT_EQ(compacted.header.chunk_size, sizes.output);
  std::size_t expected_chunks = 0;
  for (std::uint64_t bytes : kRegionBytes) expected_chunks += (bytes + sizes.output - 1) / sizes.output;
  EXPECT_EQ(compacted.chunks.size(), expected_chunks);
}

INSTANTIATE_TEST_SUITE_P(
    ChunkSizes, CompactionStreamSizes,
    ::testing::Values(Sizes{65536, 65536, 65536, Codec::kNone},     // all alike
                      Sizes{262144, 24576, 65536, Codec::kNone},    // full larger, deltas smaller, unaligned
                      Sizes{16384, 100000, 65536, Codec::kNone},    // full smaller, deltas unaligned and larger
                      Sizes{65536, 65536, 100003, Codec::kNone},    // output unaligned with every link
                      Sizes{262144, 4096, 4096, Codec::kNone},      // one page per output chunk
                      Sizes{100000, 30000, 1u << 20, Codec::kNone},  // output larger than any region
                      Sizes{262144, 24576, 65536, Codec::kLz4},     // compressed links: decoded whole, then split
                      Sizes{65536, 100000, 100003, Codec::kZstd}),
    [](const ::testing::TestParamInfo<Sizes>& param) {
      const Sizes& sizes = param.param;
      return "full" + std::to_string(sizes.full) + "_deltas" + std::to_string(sizes.delta) + "_output" +
             std::to_string(sizes.output) + "_codec" + std::to_string(static_cast<int>(sizes.links));
    });

// --------------------------------------------------- each chunk read once

// Counts the reads at each offset of one file.
class CountingFile final : public ReadableFile {
 public:
  explicit CountingFile(std::unique_ptr<ReadableFile> file) : file_(std::move(file)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    ++reads_[offset];
    file_->read_at(offset, data, bytes);
  }
  std::uint64_t size() const override { return file_->size(); }
  const std::string& path() const override { return file_->path(); }
  int reads_at(std::uint64_t offset) const { return reads_.count(offset) ? reads_.at(offset) : 0; }

 private:
  std::unique_ptr<ReadableFile> file_;
  mutable std::map<std::uint64_t, int> reads_;
};

TEST(ChainMergeTest, EachChunkOfEveryLinkIsReadOnceWhateverTheRangesSize) {
  Chain chain;
  chain.add_full(262144);
  chain.add_delta(24576);
  chain.add_delta(100000);
  std::vector<format::ChainLink> links;
  std::vector<const CountingFile*> counters;
  for (int version = chain.newest(); version >= 1; --version) {
    auto file = std::make_unique<CountingFile>(Env::posix()->open(chain.path(version)));
    counters.push_back(file.get());
    format::Container container = format::read_container(*file);
    links.push_back({std::move(file), std::move(container)});
  }
  format::ChainMerge merge(links);
  State merged;
  for (std::uint32_t r = 0; r < kRegionBytes.size(); ++r) {
    merged.emplace_back(kRegionBytes[r]);
    for (std::uint64_t at = 0; at < kRegionBytes[r]; at += 50000) {
      merge.fill(r, at, std::min<std::uint64_t>(50000, kRegionBytes[r] - at), merged[r].data() + at);
    }
  }
  merge.check_complete();
  EXPECT_TRUE(merged == chain.state());
  for (std::size_t i = 0; i < links.size(); ++i) {
    for (const format::ChunkRecord& chunk : links[i].container.chunks) {
      // Chunks of at most 256 KiB are read in one call (read_chunk).
      EXPECT_EQ(counters[i]->reads_at(chunk.file_offset), 1)
          << "link " << i << ": chunk at offset " << chunk.offset << " of region " << chunk.region;
    }
  }
}

TEST(ChainMergeTest, RangesThatSkipChunksAreRefusedBeforeTheCommit) {
  Chain chain;
  chain.add_full(65536);
  chain.add_delta(65536);
  std::vector<format::ChainLink> links;
  for (int version = chain.newest(); version >= 1; --version) {
    std::unique_ptr<ReadableFile> file = Env::posix()->open(chain.path(version));
    format::Container container = format::read_container(*file);
    links.push_back({std::move(file), std::move(container)});
  }
  format::ChainMerge merge(links);
  std::vector<std::byte> bytes(kRegionBytes[0]);
  merge.fill(0, 0, bytes.size(), bytes.data());  // region 0 only
  EXPECT_THROW(merge.check_complete(), StorageError);
}

// ------------------------------------------ damage and faults: the delta stays

void expect_delta_left_as_it_was(Chain& chain, const std::vector<std::byte>& before,
                                 const std::vector<std::string>& names_before) {
  EXPECT_TRUE(read_file(chain.path(chain.newest())) == before) << "the delta was changed";
  EXPECT_EQ(chain.names(), names_before) << "a temporary or another file was left";
}

// Flips one byte of the chunk `chunk_index` (from the end when negative) of `version`'s file.
void damage_chunk(const Chain& chain, int version, int chunk_index) {
  const format::Container container = format::read_container(*Env::posix()->open(chain.path(version)));
  const int count = static_cast<int>(container.chunks.size());
  const format::ChunkRecord& chunk = container.chunks.at(static_cast<std::size_t>((chunk_index + count) % count));
  flip_bit(chain.path(version), chunk.file_offset + chunk.stored_length / 2, 6);
}

class CompactionStreamDamage : public ::testing::TestWithParam<std::tuple<int, int>> {};

// A damaged chunk in the newest delta, a middle one, or the full version
// (its first or last chunk, the last met after most of the output is
// written): the compaction fails naming the file, and commits nothing.
TEST_P(CompactionStreamDamage, ADamagedLinkIsDetectedAndNothingIsCommitted) {
  const auto [version, chunk_index] = GetParam();
  Chain chain;
  chain.add_full(65536);
  for (int delta = 0; delta < 3; ++delta) chain.add_delta(24576);
  damage_chunk(chain, version, chunk_index);
  const std::vector<std::byte> before = read_file(chain.path(chain.newest()));
  const std::vector<std::string> names = chain.names();
  try {
    compact_version(chain.level(), chain.newest(), 1, unpaced(), {}, output(65536));
    FAIL() << "a damaged link was merged";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find(format::container_file_name(version, 0)), std::string::npos)
        << error.what();
  }
  expect_delta_left_as_it_was(chain, before, names);
}

INSTANTIATE_TEST_SUITE_P(Links, CompactionStreamDamage,
                         ::testing::Values(std::make_tuple(4, 0), std::make_tuple(2, -1), std::make_tuple(1, 0),
                                           std::make_tuple(1, -1)));

class CompactionStreamFaults : public ::testing::TestWithParam<FaultEnv::Fault> {};

// An I/O error in the middle of the merge (a read of a base) or of the
// write (the temporary's appends, the file system full): the compaction
// fails, the delta stays, no temporary is left; once the fault is gone, the
// compaction succeeds.
TEST_P(CompactionStreamFaults, AFailedCallMidwayLeavesTheDelta) {
  auto env = std::make_shared<FaultEnv>();
  Chain chain(env);
  chain.add_full(65536);
  for (int delta = 0; delta < 3; ++delta) chain.add_delta(24576);
  const std::vector<std::byte> before = read_file(chain.path(chain.newest()));
  const std::vector<std::string> names = chain.names();
  env->inject(GetParam());
  EXPECT_THROW(compact_version(chain.level(), chain.newest(), 1, unpaced(), {}, output(65536)), StorageError);
  EXPECT_EQ(env->failures(), 1) << "the fault was not reached";
  expect_delta_left_as_it_was(chain, before, names);
  env->clear();
  EXPECT_TRUE(compact_version(chain.level(), chain.newest(), 1, unpaced(), {}, output(65536)).rewritten);
  EXPECT_TRUE(chain.restore_full(chain.newest()) == chain.state());
}

INSTANTIATE_TEST_SUITE_P(
    Calls, CompactionStreamFaults,
    ::testing::Values(FaultEnv::Fault{FaultEnv::Op::kRead, EIO, format::container_file_name(1, 0), 6},
                      FaultEnv::Fault{FaultEnv::Op::kRead, EIO, format::container_file_name(3, 0), 8},
                      FaultEnv::Fault{FaultEnv::Op::kAppend, ENOSPC, format::container_file_name(4, 0), 3, 1, true},
                      FaultEnv::Fault{FaultEnv::Op::kSync, EIO, format::container_file_name(4, 0)}));

}  // namespace
}  // namespace resurgo
