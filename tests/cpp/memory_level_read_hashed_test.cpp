// MemoryLevel::Reader::read_hashed_at (format::ReadsHashed), the restore's
// read of a chunk from memory: the bytes and checksum() of them, for a range
// inside one piece (one pass) and one across a piece bound (a read, then a
// checksum), and the same errors as read_at past the end.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "base/units.h"
#include "resurgo/errors.hpp"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

constexpr std::uint64_t kPiece = 2 * kMiB;  // the level's piece (memory_level.cpp)

std::vector<std::byte> piece_pattern(std::uint64_t bytes) {
  std::vector<std::byte> data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + i / 4093) & 0xff);
  return data;
}

class MemoryLevelReadHashedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_.commit(1, [&](WritableFile& file) { file.append(data_.data(), data_.size()); });
    reader_ = memory_.open_in_place(1);
    ASSERT_NE(reader_, nullptr);
  }

  // What read_hashed_at gives for [offset, offset + bytes), checked against the data.
  void expect_read(std::uint64_t offset, std::uint64_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_EQ(reader_->read_hashed_at(offset, out.data(), bytes), checksum(data_.data() + offset, bytes))
        << bytes << " bytes at " << offset;
    EXPECT_EQ(0, std::memcmp(out.data(), data_.data() + offset, bytes)) << bytes << " bytes at " << offset;
  }

  std::vector<std::byte> data_ = piece_pattern(2 * kPiece + 4097);
  MemoryLevel memory_{"s", 0, 8 * kMiB, 0};
  std::unique_ptr<MemoryLevel::Reader> reader_;
};

TEST_F(MemoryLevelReadHashedTest, ARangeInOnePieceReadsItsBytesAndTheirChecksum) {
  expect_read(0, kMiB);
  expect_read(48, kPiece - 48);      // up to the piece's last byte
  expect_read(kPiece, kPiece);       // the whole second piece
  expect_read(2 * kPiece + 1, 4096);  // the tail, in the third
  expect_read(17, 200);               // a short one
}

TEST_F(MemoryLevelReadHashedTest, ARangeAcrossPiecesReadsItsBytesAndTheirChecksum) {
  expect_read(kPiece - 1, 2);
  expect_read(kPiece - kMiB, 2 * kMiB + 3);
  expect_read(0, data_.size());
}

TEST_F(MemoryLevelReadHashedTest, ARangePastTheEndIsAStorageError) {
  std::vector<std::byte> out(2);
  EXPECT_THROW(reader_->read_hashed_at(data_.size() - 1, out.data(), 2), StorageError);
  EXPECT_THROW(reader_->read_hashed_at(data_.size() + 1, out.data(), 0), StorageError);
}

// Pieces go back to the pool and are reused as they are (no page faults):
// a smaller version written into them shows its own bytes and no more.
TEST(MemoryLevelReuseTest, AReusedPieceShowsOnlyTheNewVersionsBytes) {
  MemoryLevel memory("s", 0, kPiece, 0);  // one piece: version 2 must reuse version 1's
  const std::vector<std::byte> first(kMiB, std::byte{0x11});
  const std::vector<std::byte> second = piece_pattern(kMiB / 2 + 3);
  memory.commit(1, [&](WritableFile& file) { file.append(first.data(), first.size()); });
  memory.remove(1);
  memory.commit(2, [&](WritableFile& file) { file.append(second.data(), second.size()); });
  const std::unique_ptr<MemoryLevel::Reader> reader = memory.open_in_place(2);
  ASSERT_EQ(reader->size(), second.size());
  std::vector<std::byte> out(second.size());
  EXPECT_EQ(reader->read_hashed_at(0, out.data(), out.size()), checksum(second.data(), second.size()));
  EXPECT_EQ(out, second);
  EXPECT_THROW(reader->read_hashed_at(second.size(), out.data(), 1), StorageError) << "version 1's bytes past the end";
}

}  // namespace
}  // namespace resurgo
