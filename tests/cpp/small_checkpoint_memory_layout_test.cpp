// How the memory level lays out a version written through ContainerWriter
// (the capture's one copy into L1, issue 27): the container's bytes are the
// same as in a file, every chunk that fits where it is written starts at a
// 64-byte bound (its copy stores whole cache lines), and no span a reader
// is given crosses a piece bound (a pinned piece is its own registration).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "base/units.h"
#include "base/thread_pool.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

constexpr std::uint64_t kLayoutPiece = 2 * kMiB;  // the level's piece (memory_level.cpp)

// A WritableFile in a vector: what a directory level would store.
class LayoutVectorFile final : public WritableFile {
 public:
  void append(const void* data, std::size_t bytes) override {
    const auto* begin = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), begin, begin + bytes);
  }
  void sync() override {}
  void close() override {}
  const std::string& path() const override { return path_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::string path_ = "vector";
  std::vector<std::byte> bytes_;
};

std::vector<std::byte> layout_pattern(std::uint64_t bytes) {
  std::vector<std::byte> data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 2654435761u) >> 11);
  return data;
}

// One region of `state`'s bytes, in raw chunks of the given lengths, in order.
class MemoryLayoutTest : public ::testing::Test {
 protected:
  void write(WritableFile& file) const {
    format::ContainerWriter writer(file, header());
    std::uint64_t offset = 0;
    for (const std::uint64_t length : lengths_) {
      writer.add_raw_chunk({0, offset, length, length, Codec::kNone, 0, 0}, state_.data() + offset);
      offset += length;
    }
    writer.finish();
  }

  format::Header header() const {
    format::Header header;
    header.store = "layout";
    header.version = 1;
    header.chunk_size = 4 * kMiB;  // the largest chunk below is a piece and 7 bytes
    std::uint64_t region_bytes = 0;
    for (const std::uint64_t length : lengths_) region_bytes += length;
    header.regions = {{0, "odd-label", format::RegionKind::kHost, region_bytes, "", {}, format::kDeviceUnknown}};
    return header;
  }

  // Chunks around the piece's bounds: some fit at a 64-byte bound, one
  // only where the record before it ends, one in neither (across pieces).
  std::vector<std::uint64_t> lengths_{100, 64 * kKiB, 250 * kKiB + 3, kMiB, kLayoutPiece - 200 * kKiB - 64,
                                      kLayoutPiece - 48 - 20, 4099, kLayoutPiece + 7, 3 * kKiB};
  std::vector<std::byte> state_ = layout_pattern(8 * kMiB);
  MemoryLevel memory_{"layout", 0, 32 * kMiB, 0};
};

TEST_F(MemoryLayoutTest, TheVersionHoldsTheSameBytesAsAFile) {
  LayoutVectorFile file;
  write(file);
  memory_.commit(1, [&](WritableFile& level_file) { write(level_file); });
  const auto reader = memory_.open(1);
  ASSERT_EQ(reader->size(), file.bytes().size());
  std::vector<std::byte> held(reader->size());
  reader->read_at(0, held.data(), held.size());
  EXPECT_TRUE(held == file.bytes()) << "the level's container differs from the file's";
}

TEST_F(MemoryLayoutTest, EveryChunkVerifiesAndThoseThatFitStartAtALineBound) {
  memory_.commit(1, [&](WritableFile& file) { write(file); });
  const std::unique_ptr<MemoryLevel::Reader> reader = memory_.open_in_place(1);
  const format::Container container = format::read_container(*reader);
  ASSERT_EQ(container.chunks.size(), lengths_.size());
  int aligned = 0;
  for (const format::ChunkRecord& chunk : container.chunks) {
    std::vector<std::byte> out(chunk.stored_length);
    EXPECT_EQ(reader->read_hashed_at(chunk.file_offset, out.data(), out.size()), chunk.checksum);
    EXPECT_EQ(0, std::memcmp(out.data(), state_.data() + chunk.offset, out.size())) << "chunk at " << chunk.offset;
    std::vector<std::uintptr_t> starts;
    reader->for_each_span(chunk.file_offset, chunk.stored_length, [&](const std::byte* data, std::uint64_t) {
      starts.push_back(reinterpret_cast<std::uintptr_t>(data));
    });
    if (starts.size() == 1 && chunk.stored_length > 240) {
      EXPECT_EQ(starts.front() % 64, 0u) << "chunk of " << chunk.stored_length << " bytes at " << chunk.offset;
      ++aligned;
    }
  }
  EXPECT_GE(aligned, 5) << "the chunks within a piece";
}

TEST_F(MemoryLayoutTest, NoSpanCrossesAPieceBound) {
  memory_.commit(1, [&](WritableFile& file) { write(file); });
  const std::unique_ptr<MemoryLevel::Reader> reader = memory_.open_in_place(1);
  std::uint64_t seen = 0;
  reader->for_each_span(0, reader->size(), [&](const std::byte* data, std::uint64_t bytes) {
    const auto first = reinterpret_cast<std::uintptr_t>(data);
    EXPECT_EQ(first / kLayoutPiece, (first + bytes - 1) / kLayoutPiece) << bytes << " bytes at byte " << seen;
    seen += bytes;
  });
  EXPECT_EQ(seen, reader->size());
}

TEST_F(MemoryLayoutTest, AnOverwriteOfAnAppendedRangeLandsWhereItWasAppended) {
  const std::vector<std::byte> head = layout_pattern(300);
  const std::vector<std::byte> patch(40, std::byte{0x5A});
  memory_.commit(2, [&](WritableFile& file) {
    auto& in_memory = dynamic_cast<format::AppendsInMemory&>(file);
    file.append(head.data(), head.size());
    EXPECT_EQ(in_memory.append_hashed(state_.data(), 64 * kKiB), checksum(state_.data(), 64 * kKiB));
    in_memory.overwrite_appended(280, patch.data(), patch.size());  // across the gap before the chunk
  });
  std::vector<std::byte> expected(head);
  expected.insert(expected.end(), state_.begin(), state_.begin() + 64 * kKiB);
  std::memcpy(expected.data() + 280, patch.data(), patch.size());
  const auto reader = memory_.open(2);
  std::vector<std::byte> held(reader->size());
  reader->read_at(0, held.data(), held.size());
  EXPECT_TRUE(held == expected);
}

// A chunk that fits the rest of its piece only without the gap follows the
// bytes before it there, still in one span (copied in one pass).
TEST_F(MemoryLayoutTest, AChunkThatFitsOnlyWithoutAGapFollowsTheBytesBefore) {
  const std::vector<std::byte> head = layout_pattern(kLayoutPiece - 64 * kKiB - 10);
  const std::uint64_t chunk = 64 * kKiB + 8;
  memory_.commit(3, [&](WritableFile& file) {
    file.append(head.data(), head.size());
    auto& in_memory = dynamic_cast<format::AppendsInMemory&>(file);
    EXPECT_EQ(in_memory.append_hashed(state_.data(), chunk), checksum(state_.data(), chunk));
  });
  const std::unique_ptr<MemoryLevel::Reader> reader = memory_.open_in_place(3);
  ASSERT_EQ(reader->size(), head.size() + chunk);
  int spans = 0;
  reader->for_each_span(head.size(), chunk, [&](const std::byte* data, std::uint64_t bytes) {
    ++spans;
    EXPECT_EQ(0, std::memcmp(data, state_.data(), bytes));
  });
  EXPECT_EQ(spans, 1);
}

// A version written with the default chunk size (4 MiB, two pieces) is cut
// into chunks of at most the level's longest run, each in one span: copied
// and hashed in one pass when written, read and verified in one pass at
// restore. A file gets the configured chunks.
TEST_F(MemoryLayoutTest, AWriterCutsTheChunksOfAVersionInMemoryToOneRunEach) {
  const std::uint64_t region_bytes = 7 * kMiB + 5;
  format::Header header = this->header();
  header.chunk_size = Config{}.pipeline.chunk_size;
  header.regions[0].bytes = region_bytes;
  ThreadPool pool(0);
  const std::vector<const std::byte*> sources{state_.data()};
  std::uint64_t longest = 0;
  memory_.commit(4, [&](WritableFile& file) {
    longest = dynamic_cast<format::AppendsInMemory&>(file).longest_run();
    write_version(file, header, sources, Config{}.pipeline, pool);
  });
  ASSERT_LT(longest, header.chunk_size);
  const std::unique_ptr<MemoryLevel::Reader> reader = memory_.open_in_place(4);
  const format::Container in_memory = format::read_container(*reader);
  ASSERT_EQ(in_memory.chunks.size(), (region_bytes + longest - 1) / longest);
  for (const format::ChunkRecord& chunk : in_memory.chunks) {
    EXPECT_LE(chunk.raw_length, longest);
    int spans = 0;
    reader->for_each_span(chunk.file_offset, chunk.stored_length, [&](const std::byte*, std::uint64_t) { ++spans; });
    EXPECT_EQ(spans, 1) << "chunk at byte " << chunk.offset << " of the region";
    std::vector<std::byte> out(chunk.stored_length);
    EXPECT_EQ(reader->read_hashed_at(chunk.file_offset, out.data(), out.size()), chunk.checksum);
    EXPECT_EQ(0, std::memcmp(out.data(), state_.data() + chunk.offset, out.size()));
  }
  LayoutVectorFile file;
  WriteResult written;
  write_version(file, header, sources, Config{}.pipeline, pool, &written);
  EXPECT_EQ(written.chunks, 2u) << "4 MiB chunks in a file";
}

}  // namespace
}  // namespace resurgo
