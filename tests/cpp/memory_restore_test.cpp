// Restore from the L1 memory level (issue 27): a chunk is read straight into
// its region and verified there in one pass, whatever its size (a lone small
// chunk too, which a run of small chunks in a file would have read into
// scratch first), and a damaged chunk is still found and refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "format/container.h"
#include "one_region_restore.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

constexpr std::uint64_t kKiB = 1024;

std::vector<std::byte> pattern(std::uint64_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + i / 4093 + seed) & 0xff);
  return data;
}

class MemoryRestoreTest : public ::testing::TestWithParam<std::uint64_t> {
 protected:
  // A version of one region "u" in chunks of `chunk_bytes`; the chunk at
  // `damaged` (if any) has a byte changed after its checksum was taken: its
  // byte `at`, or its middle one.
  void commit(int version, const std::vector<std::byte>& data, std::uint64_t chunk_bytes, std::int64_t damaged = -1,
              std::int64_t at = -1) {
    format::Header header;
    header.store = "s";
    header.store_id = id_;
    header.version = version;
    header.chunk_size = chunk_bytes;
    header.regions.push_back({0, "u", format::RegionKind::kHost, data.size(), "", {}});
    memory_.commit(version, [&](WritableFile& file) {
      format::ContainerWriter writer(file, header);
      for (std::uint64_t offset = 0; offset < data.size(); offset += chunk_bytes) {
        const std::uint64_t bytes = std::min(chunk_bytes, data.size() - offset);
        std::vector<std::byte> stored(data.begin() + offset, data.begin() + offset + bytes);
        const std::uint64_t sum = checksum(stored.data(), stored.size());
        if (static_cast<std::int64_t>(offset) == damaged) stored[at < 0 ? bytes / 2 : at] ^= std::byte{0x20};
        writer.add_chunk({0, offset, bytes, bytes, Codec::kNone, sum, 0}, stored.data());
      }
      writer.finish();
    });
  }

  int restore(std::vector<std::byte>& region, int version) {
    return testing::restore_one_region(memory_, id_, version, region, pool_, log_, trace_);
  }

  format::StoreId id_ = format::StoreId::random();
  MemoryLevel memory_{"s", 0, 16u << 20, 0};
  ThreadPool pool_{1};
  Logger log_{"memory-restore", LogLevel::kError};
  Trace trace_{""};
};

TEST_P(MemoryRestoreTest, AVersionInMemoryIsRestoredByteForByte) {
  const std::uint64_t chunk = GetParam();
  const std::vector<std::byte> data = pattern(chunk + chunk / 2, 1);  // a whole chunk and a half one
  commit(1, data, chunk);
  std::vector<std::byte> region(data.size());
  EXPECT_EQ(restore(region, 1), 1);
  EXPECT_EQ(region, data);
}

TEST_P(MemoryRestoreTest, ADamagedChunkInMemoryIsRefusedAtRestore) {
  const std::uint64_t chunk = GetParam();
  const std::vector<std::byte> data = pattern(chunk, 2);  // a lone chunk
  commit(1, data, chunk, 0);
  std::vector<std::byte> region(data.size());
  try {
    restore(region, 1);
    FAIL() << "a damaged chunk in memory was restored";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find("region 'u'"), std::string::npos) << error.what();
  }
}

// The one-pass copy and checksum (base/copy_checksum.h) sees every byte:
// the first, the last, and one in the last stripe, which XXH3 hashes twice.
TEST_P(MemoryRestoreTest, ADamagedFirstOrLastByteInMemoryIsRefusedAtRestore) {
  const std::uint64_t chunk = GetParam();
  const auto bytes = static_cast<std::int64_t>(chunk);
  for (const std::int64_t at : {std::int64_t{0}, bytes - 40, bytes - 1}) {
    commit(1, pattern(chunk, 5), chunk, 0, at);
    std::vector<std::byte> region(chunk);
    EXPECT_THROW(restore(region, 1), CorruptionError) << "byte " << at;
    memory_.remove(1);
  }
}

TEST_P(MemoryRestoreTest, RestartFallsBackPastAVersionDamagedInMemory) {
  const std::uint64_t chunk = GetParam();
  const std::vector<std::byte> older = pattern(2 * chunk, 3);
  commit(1, older, chunk);
  commit(2, pattern(2 * chunk, 4), chunk, static_cast<std::int64_t>(chunk));
  std::vector<std::byte> region(older.size());
  EXPECT_EQ(restore(region, kLatest), 1);
  EXPECT_EQ(region, older);
  EXPECT_FALSE(memory_.holds(2)) << "the damaged copy is dropped";
}

// 64 KiB: a small chunk (read alone, straight into its region); 256 KiB: a
// chunk hashed in one piece; 1 MiB: one hashed piece by piece.
INSTANTIATE_TEST_SUITE_P(ChunkSizes, MemoryRestoreTest, ::testing::Values(64 * kKiB, 256 * kKiB, 1024 * kKiB));

}  // namespace
}  // namespace resurgo
