// The L1 memory level on its own: atomic visibility, the capacity bound and
// its error, reuse of freed memory, readers outliving a removal, eviction,
// and verified copies from a damaged source.
#include "tier/memory_level.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/units.h"
#include "chain_files.h"
#include "format/container.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

// A version of `bytes` raw bytes (any content): the level stores what it is given.
std::function<void(WritableFile&)> raw_bytes(std::uint64_t bytes, std::byte value) {
  return [bytes, value](WritableFile& file) {
    const std::vector<std::byte> block(kMiB, value);
    for (std::uint64_t done = 0; done < bytes; done += kMiB) file.append(block.data(), std::min(kMiB, bytes - done));
  };
}

TEST(MemoryLevelTest, CommittedVersionReadsBackWhatWasWritten) {
  MemoryLevel memory("s", 0, 16 * kMiB, 0);
  memory.commit(3, raw_bytes(5 * kMiB + 17, std::byte{7}));
  ASSERT_TRUE(memory.holds(3));
  const auto file = memory.open(3);
  ASSERT_EQ(file->size(), 5 * kMiB + 17);
  std::vector<std::byte> tail(4 * kMiB);  // crosses piece boundaries
  file->read_at(file->size() - tail.size(), tail.data(), tail.size());
  EXPECT_EQ(tail, std::vector<std::byte>(tail.size(), std::byte{7}));
  EXPECT_THROW(file->read_at(file->size() - 1, tail.data(), 2), StorageError);
}

TEST(MemoryLevelTest, AFailedWriteLeavesNothingVisibleAndFreesItsMemory) {
  MemoryLevel memory("s", 0, 8 * kMiB, 0);
  EXPECT_THROW(memory.commit(1,
                             [](WritableFile& file) {
                               raw_bytes(3 * kMiB, std::byte{1})(file);
                               throw StorageError("encoder failed");
                             }),
               StorageError);
  EXPECT_FALSE(memory.holds(1));
  EXPECT_EQ(memory.free_bytes(), memory.capacity());
}

TEST(MemoryLevelTest, AVersionThatDoesNotFitFailsNamingWhatHoldsTheMemory) {
  MemoryLevel memory("s", 0, 8 * kMiB, 0);
  memory.commit(1, raw_bytes(5 * kMiB, std::byte{1}));
  try {
    memory.commit(2, raw_bytes(5 * kMiB, std::byte{2}));
    FAIL() << "a version beyond the capacity was accepted";
  } catch (const StorageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("version 2"), std::string::npos) << message;
    EXPECT_NE(message.find("[1]"), std::string::npos) << message;
    EXPECT_NE(message.find("memory.capacity"), std::string::npos) << message;
  }
  EXPECT_FALSE(memory.holds(2));
  memory.remove(1);
  memory.commit(2, raw_bytes(5 * kMiB, std::byte{2}));  // the freed memory is used again
  EXPECT_TRUE(memory.holds(2));
}

TEST(MemoryLevelTest, AReaderKeepsARemovedVersionReadableUntilItFinishes) {
  MemoryLevel memory("s", 0, 8 * kMiB, 0);
  int freed = 0;
  memory.on_space_freed([&] { ++freed; });
  memory.commit(1, raw_bytes(3 * kMiB, std::byte{9}));
  EXPECT_EQ(freed, 0) << "the rest of what the commit took was free before it";
  auto reader = memory.open(1);
  memory.remove(1);
  EXPECT_FALSE(memory.holds(1));
  EXPECT_EQ(freed, 0);
  std::byte last{};
  reader->read_at(reader->size() - 1, &last, 1);
  EXPECT_EQ(last, std::byte{9});
  reader.reset();
  EXPECT_EQ(freed, 1);
  EXPECT_EQ(memory.free_bytes(), memory.capacity());
}

TEST(MemoryLevelTest, EvictionKeepsTheNewestAndTheBasesTheyNeed) {
  MemoryLevel memory("s", 0, 64 * kMiB, 2);
  for (int version = 1; version <= 5; ++version) memory.commit(version, raw_bytes(kMiB, std::byte{1}));
  // 5 is a delta on 2; 4 is pinned (a later level still copies it).
  const std::map<int, int> bases{{1, -1}, {2, -1}, {3, -1}, {4, -1}, {5, 2}};
  const std::vector<int> removed =
      memory.evict([](int version) { return version == 4; }, [&](int version) { return bases.at(version); });
  EXPECT_EQ(removed, (std::vector<int>{1, 3}));
  EXPECT_EQ(memory.versions(), (std::vector<int>{2, 4, 5}));
}

TEST(MemoryLevelTest, CopyFromADamagedFileIsRefusedAndLeavesNothing) {
  TempDir dir;
  DirectoryLevel disk(2, dir.path(), "s", 0, 0600, 0, Env::posix());
  disk.prepare();
  const std::vector<format::RegionEntry> regions{{0, "u", format::RegionKind::kHost, 1u << 20, "", {}}};
  disk.commit(4, chain_file("s", 4, -1, regions, {}, 256u << 10));
  MemoryLevel memory("s", 0, 8 * kMiB, 0);
  memory.commit_copy(4, *disk.open(4));
  EXPECT_EQ(memory.open(4)->size(), disk.open(4)->size());
  memory.remove(4);
  flip_bit(disk.path(4), disk.open(4)->size() / 2);
  EXPECT_THROW(memory.commit_copy(4, *disk.open(4)), CorruptionError);
  EXPECT_FALSE(memory.holds(4));
  EXPECT_EQ(memory.free_bytes(), memory.capacity());
}

}  // namespace
}  // namespace resurgo
