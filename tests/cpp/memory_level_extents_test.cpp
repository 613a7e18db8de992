// Versions of the L1 memory level share its 2 MiB pieces (issue 27: many
// small versions in few touched pieces). Each takes extents of the pieces
// and gives back what it did not use; removed versions' extents are reused
// before a fresh piece is taken, and free neighbours coalesce. The level's
// promises stay: a full level fails naming what holds it, a copy fits when
// free_bytes() covers its footprint(), versions restore verified and byte
// for byte whatever was removed around them, a piece is pinned once however
// many versions share it, and commits, removals and reads may run at once.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/checksum.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "base/units.h"
#include "format/container.h"
#include "one_region_restore.h"
#include "resurgo/errors.hpp"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

constexpr std::uint64_t kExtentPiece = 2 * kMiB;  // the level's (memory_level.cpp)

std::vector<std::byte> extent_pattern(std::uint64_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + i / 4093 + seed) & 0xff);
  return data;
}

void commit_extent_bytes(MemoryLevel& level, int version, const std::vector<std::byte>& bytes) {
  level.commit(version, [&](WritableFile& file) { file.append(bytes.data(), bytes.size()); });
}

std::vector<std::byte> read_extent_version(MemoryLevel& level, int version) {
  const auto file = level.open(version);
  std::vector<std::byte> bytes(file->size());
  file->read_at(0, bytes.data(), bytes.size());
  return bytes;
}

// Where the version's first byte lies.
const std::byte* first_byte_of(MemoryLevel& level, int version) {
  const std::byte* first = nullptr;
  level.open_in_place(version)->for_each_span(0, 1, [&](const std::byte* data, std::uint64_t) { first = data; });
  return first;
}

TEST(MemoryLevelExtentsTest, ManySmallVersionsShareOnePiece) {
  MemoryLevel level("s", 0, 64 * kMiB, 0);
  for (int version = 1; version <= 8; ++version)
    commit_extent_bytes(level, version, extent_pattern(256 * kKiB, version));
  EXPECT_EQ(level.allocated_bytes(), kExtentPiece) << "eight versions of 256 KiB in one piece";
  EXPECT_EQ(level.free_bytes(), level.capacity() - 8 * 256 * kKiB);
  EXPECT_EQ(first_byte_of(level, 2), first_byte_of(level, 1) + 256 * kKiB) << "consecutive versions lie side by side";
  commit_extent_bytes(level, 9, extent_pattern(256 * kKiB, 9));
  EXPECT_EQ(level.allocated_bytes(), 2 * kExtentPiece);
  for (int version = 1; version <= 9; ++version) {
    EXPECT_EQ(read_extent_version(level, version), extent_pattern(256 * kKiB, version));
  }
  const std::byte* hole = first_byte_of(level, 5);
  level.remove(5);
  commit_extent_bytes(level, 10, extent_pattern(256 * kKiB, 10));
  EXPECT_EQ(first_byte_of(level, 10), hole) << "the hole of its size (still in cache), not the larger rest";
}

TEST(MemoryLevelExtentsTest, ARemovedVersionsBytesAreReusedBeforeAFreshPiece) {
  MemoryLevel level("s", 0, 64 * kMiB, 0);
  for (int version = 1; version <= 8; ++version)
    commit_extent_bytes(level, version, extent_pattern(256 * kKiB, version));
  const std::byte* freed = first_byte_of(level, 3);
  level.remove(3);
  commit_extent_bytes(level, 10, extent_pattern(200 * kKiB, 10));
  EXPECT_EQ(first_byte_of(level, 10), freed);
  commit_extent_bytes(level, 11, extent_pattern(56 * kKiB, 11));  // the rest of the hole
  EXPECT_EQ(first_byte_of(level, 11), freed + 200 * kKiB);
  EXPECT_EQ(level.allocated_bytes(), kExtentPiece);
  EXPECT_EQ(read_extent_version(level, 4), extent_pattern(256 * kKiB, 4)) << "the neighbour is untouched";
}

TEST(MemoryLevelExtentsTest, FreedNeighboursCoalesceSoThatANearlyWholePieceFitsAgain) {
  MemoryLevel level("s", 0, kExtentPiece, 0);  // one piece: no fresh one to fall back on
  for (int version = 1; version <= 8; ++version)
    commit_extent_bytes(level, version, extent_pattern(256 * kKiB, version));
  for (int version : {2, 4, 6, 8, 1, 3, 5}) level.remove(version);
  EXPECT_THROW(commit_extent_bytes(level, 9, extent_pattern(kExtentPiece - 64, 9)), LevelFullError)
      << "version 7 holds the piece's end";
  auto reader = level.open(7);
  level.remove(7);
  EXPECT_THROW(commit_extent_bytes(level, 9, extent_pattern(kExtentPiece - 64, 9)), LevelFullError)
      << "a reader holds version 7";
  EXPECT_EQ(reader->size(), 256 * kKiB);
  std::byte last{};
  reader->read_at(reader->size() - 1, &last, 1);
  EXPECT_EQ(last, extent_pattern(256 * kKiB, 7).back());
  int freed = 0;
  level.on_space_freed([&] { ++freed; });
  reader.reset();
  EXPECT_EQ(freed, 1);
  EXPECT_EQ(level.free_bytes(), level.capacity());
  commit_extent_bytes(level, 9, extent_pattern(kExtentPiece - 64, 9));
  EXPECT_EQ(read_extent_version(level, 9), extent_pattern(kExtentPiece - 64, 9));
  EXPECT_EQ(level.allocated_bytes(), kExtentPiece);
}

TEST(MemoryLevelExtentsTest, AFullLevelFailsNamingTheVersionsAndGivesBackWhatItTook) {
  MemoryLevel level("s", 0, 2 * kExtentPiece, 0);
  for (int version = 1; version <= 3; ++version)
    commit_extent_bytes(level, version, extent_pattern(kMiB + 100 * kKiB, version));
  const std::uint64_t free = level.free_bytes();
  try {
    commit_extent_bytes(level, 4, extent_pattern(kMiB, 4));
    FAIL() << "a version beyond the capacity was accepted";
  } catch (const LevelFullError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("version 4 does not fit"), std::string::npos) << message;
    EXPECT_NE(message.find("store 's'"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 2, 3]"), std::string::npos) << message;
    EXPECT_NE(message.find("raise memory.capacity"), std::string::npos) << message;
  }
  EXPECT_FALSE(level.holds(4));
  EXPECT_EQ(level.free_bytes(), free) << "the failed version's extents are back";
  commit_extent_bytes(level, 4, extent_pattern(free, 4));
  EXPECT_EQ(level.free_bytes(), 0u);
  EXPECT_EQ(read_extent_version(level, 4), extent_pattern(free, 4));
}

// Container versions written as a capture writes them (raw chunks, hashed
// while appended) and restored through restore_version, which verifies
// every chunk.
class MemoryLevelExtentsRestoreTest : public ::testing::Test {
 protected:
  format::Header header(int version, std::uint64_t bytes) const {
    format::Header header;
    header.store = "s";
    header.store_id = id_;
    header.version = version;
    header.chunk_size = kChunk;
    header.regions.push_back({0, "u", format::RegionKind::kHost, bytes, "", {}});
    return header;
  }
  void commit(MemoryLevel& level, int version, const std::vector<std::byte>& data) {
    level.commit(version, [&](WritableFile& file) {
      format::ContainerWriter writer(file, header(version, data.size()));
      for (std::uint64_t offset = 0; offset < data.size(); offset += kChunk) {
        const std::uint64_t bytes = std::min(kChunk, data.size() - offset);
        writer.add_raw_chunk({0, offset, bytes, bytes, Codec::kNone, 0, 0}, data.data() + offset);
      }
      writer.finish();
    });
  }
  std::vector<std::byte> restore(MemoryLevel& level, int version, std::uint64_t bytes) {
    std::vector<std::byte> region(bytes);
    EXPECT_EQ(testing::restore_one_region(level, id_, version, region, pool_, log_, trace_), version);
    return region;
  }

  static constexpr std::uint64_t kChunk = 256 * kKiB;
  format::StoreId id_ = format::StoreId::random();
  ThreadPool pool_{1};
  Logger log_{"extents", LogLevel::kError};
  Trace trace_{""};
};

TEST_F(MemoryLevelExtentsRestoreTest, VersionsRestoreByteForByteAfterOthersWereRemovedAndRewritten) {
  MemoryLevel level("s", 0, 4 * kExtentPiece, 0);
  const std::vector<std::uint64_t> sizes{4 * kKiB, 100 * kKiB + 3, 256 * kKiB, 700 * kKiB + 17, 1536 * kKiB};
  std::map<int, std::vector<std::byte>> held;
  std::mt19937 random(27);
  for (int version = 1; version <= 120; ++version) {
    std::vector<std::byte> data = extent_pattern(sizes[random() % sizes.size()], version);
    while (level.free_bytes() < data.size() + 8 * kKiB) {  // room for the records too, or the oldest goes
      level.remove(held.begin()->first);
      held.erase(held.begin());
    }
    if (!held.empty() && random() % 3 == 0) {  // a removal in the middle leaves a hole
      const auto victim = std::next(held.begin(), static_cast<long>(random() % held.size()));
      level.remove(victim->first);
      held.erase(victim);
    }
    commit(level, version, data);  // in holes too: a chunk that fits in none is spread over several
    held[version] = std::move(data);
  }
  ASSERT_GE(held.size(), 3u);
  for (const auto& [version, data] : held) EXPECT_TRUE(restore(level, version, data.size()) == data) << version;
  for (const auto& [version, data] : held) level.remove(version);
  EXPECT_EQ(level.free_bytes(), level.capacity());
  EXPECT_LE(level.allocated_bytes(), level.capacity());
}

// The prefetcher's rule (src/pipeline/prefetcher.cpp): a copy fits when the
// free bytes cover its footprint, even when they lie in holes between
// versions.
TEST_F(MemoryLevelExtentsRestoreTest, ACopyFitsInHolesWhenFreeBytesCoverItsFootprint) {
  MemoryLevel source("s", 0, 8 * kExtentPiece, 0);
  const std::vector<std::byte> data = extent_pattern(1000 * kKiB, 5);
  commit(source, 5, data);
  const std::uint64_t file_bytes = source.open(5)->size();
  MemoryLevel level("s", 0, kExtentPiece, 0);
  for (int version = 1; version <= 8; ++version)
    commit_extent_bytes(level, version, extent_pattern(256 * kKiB, version));
  for (int version : {1, 3, 5, 7}) level.remove(version);
  ASSERT_LE(level.footprint(file_bytes), level.free_bytes()) << "four holes of 256 KiB";
  level.commit_copy(5, *source.open(5));
  EXPECT_TRUE(restore(level, 5, data.size()) == data);
  EXPECT_EQ(level.free_bytes(), level.capacity() - 4 * 256 * kKiB - level.footprint(file_bytes));
  for (int version : {2, 4, 6, 8}) EXPECT_EQ(read_extent_version(level, version), extent_pattern(256 * kKiB, version));
}

// Records pins and unpins, from any thread; a piece pinned twice is a failure.
struct ExtentPinBook {
  std::mutex mutex;
  std::set<void*> pinned;
  int pins = 0;
  int unpins = 0;

  MemoryLevel::PiecePinner hook() {
    MemoryLevel::PiecePinner pinner;
    pinner.pin = [this](void* data, std::size_t bytes) {
      std::lock_guard lock(mutex);
      ++pins;
      EXPECT_EQ(bytes, kExtentPiece);
      EXPECT_TRUE(pinned.insert(data).second) << "pinned twice";
      return true;
    };
    pinner.unpin = [this](void* data, std::size_t) {
      std::lock_guard lock(mutex);
      ++unpins;
      EXPECT_EQ(pinned.erase(data), 1u) << "unpinned what was not pinned";
    };
    return pinner;
  }
};

TEST(MemoryLevelExtentsTest, APieceSharedByVersionsIsPinnedOnce) {
  ExtentPinBook book;
  {
    MemoryLevel level("s", 0, 8 * kExtentPiece, 0);
    level.pin_pieces(book.hook());
    for (int version = 1; version <= 8; ++version)
      commit_extent_bytes(level, version, extent_pattern(256 * kKiB, version));
    EXPECT_EQ(book.pins, 1);
    commit_extent_bytes(level, 9, extent_pattern(256 * kKiB, 9));
    EXPECT_EQ(book.pins, 2);
    EXPECT_EQ(level.pinned_bytes(), 2 * kExtentPiece);
    level.remove(2);
    level.remove(9);
    commit_extent_bytes(level, 10, extent_pattern(300 * kKiB, 10));  // too large for the hole: the second piece
    EXPECT_EQ(book.pins, 2);
    level.unpin_pieces();
    EXPECT_EQ(book.unpins, 2);
    EXPECT_EQ(level.pinned_bytes(), 0u);
    commit_extent_bytes(level, 11, extent_pattern(3 * kExtentPiece, 11));
    EXPECT_EQ(book.pins, 2) << "no more pins after unpin_pieces";
    EXPECT_EQ(read_extent_version(level, 10), extent_pattern(300 * kKiB, 10));
  }
  EXPECT_EQ(book.unpins, 2);
  EXPECT_TRUE(book.pinned.empty());
}

// Writers commit and remove versions of assorted sizes in a level too small
// for all of them, while a reader reads whatever is held: every read is the
// version's own bytes, no piece is pinned twice, and all memory is back at
// the end.
TEST(MemoryLevelExtentsTest, ConcurrentCommitsRemovalsAndReadsKeepEveryVersionIntact) {
  constexpr int kWriters = 3;
  constexpr int kVersionsPerWriter = 150;
  ExtentPinBook book;
  MemoryLevel level("s", 0, 4 * kExtentPiece, 0);
  level.pin_pieces(book.hook());
  std::atomic<int> freed{0};
  level.on_space_freed([&] { ++freed; });
  const auto bytes_of = [](int version) -> std::uint64_t { return (version % 7 + 1) * 37 * kKiB + version % 64; };
  const auto fill_of = [](int version) { return static_cast<std::byte>(version * 37 % 251); };
  std::atomic<bool> writing{true};
  std::atomic<int> full{0};
  std::vector<std::thread> writers;
  for (int writer = 0; writer < kWriters; ++writer) {
    writers.emplace_back([&, writer] {
      for (int i = 0; i < kVersionsPerWriter; ++i) {
        const int version = writer * kVersionsPerWriter + i;
        try {
          commit_extent_bytes(level, version, std::vector<std::byte>(bytes_of(version), fill_of(version)));
        } catch (const LevelFullError&) {
          ++full;
        }
        if (i >= 4) level.remove(version - 4);
      }
    });
  }
  std::thread reader([&] {
    std::mt19937 random(1);
    while (writing) {
      const int version = static_cast<int>(random() % (kWriters * kVersionsPerWriter));
      try {
        const std::vector<std::byte> bytes = read_extent_version(level, version);
        EXPECT_EQ(bytes.size(), bytes_of(version));
        EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [&](std::byte b) { return b == fill_of(version); }))
            << version;
      } catch (const NotFoundError&) {
      }
    }
  });
  for (std::thread& writer : writers) writer.join();
  writing = false;
  reader.join();
  for (int version : level.versions()) level.remove(version);
  EXPECT_EQ(level.free_bytes(), level.capacity());
  EXPECT_LE(level.allocated_bytes(), level.capacity());
  EXPECT_GT(freed.load(), 0);
  EXPECT_LT(full.load(), kWriters * kVersionsPerWriter / 10) << "4 versions per writer of at most 260 KiB fit";
  std::lock_guard lock(book.mutex);
  EXPECT_GE(book.pins, 1);
  EXPECT_LE(static_cast<std::uint64_t>(book.pins), level.allocated_bytes() / kExtentPiece) << "each piece at most once";
}

}  // namespace
}  // namespace resurgo
