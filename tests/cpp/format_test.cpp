// Container format: round trips through write_version and ContainerWriter,
// detection of every kind of damage (bit flips, truncation, foreign files,
// unsupported versions), hostile length fields and chunk layout violations.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include "format/bytes.h"
#include "format/codec.h"
#include "format/container.h"
#include "base/thread_pool.h"
#include "format/version_writer.h"
#include "resurgo/errors.hpp"
#include "tier/memory_level.h"
#include "test_util.h"

// The largest single allocation this thread made while `probing_allocations`
// was set: proves that a length read from a hostile file never reaches the
// allocator unbounded. Replacing the global operator new is allowed once per
// program; this is the only replacement in the test binary.
namespace {
thread_local bool probing_allocations = false;
thread_local std::size_t largest_allocation = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  if (probing_allocations && bytes > largest_allocation) largest_allocation = bytes;
  if (void* memory = std::malloc(bytes == 0 ? 1 : bytes)) return memory;
  throw std::bad_alloc();
}
// GCC assumes operator delete receives memory from the built-in operator
// new; here both sides are malloc/free.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
#pragma GCC diagnostic pop

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using format::ChunkRecord;
using format::Container;
using format::Header;
using format::RegionEntry;
using format::RegionKind;

constexpr std::size_t kFooter = format::kFooterBytes;
constexpr std::size_t kEntry = format::kChunkRecordBytes + 8;  // index entry: record + file offset
// Field offsets inside one index entry.
constexpr std::size_t kEntryMagic = 0, kEntryRegion = 4, kEntryOffset = 8, kEntryRaw = 16, kEntryStored = 24,
                      kEntryCodec = 32, kEntryChecksum = 40, kEntryFileOffset = 48;

// A ReadableFile over bytes in memory, for sweeps over thousands of damaged variants.
class MemoryFile final : public ReadableFile {
 public:
  MemoryFile(std::vector<std::byte> bytes, std::string path) : bytes_(std::move(bytes)), path_(std::move(path)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    if (offset > bytes_.size() || bytes > bytes_.size() - offset) {
      throw StorageError("cannot read '" + path_ + "': unexpected end of file");
    }
    if (bytes > 0) std::memcpy(data, bytes_.data() + offset, bytes);
  }
  std::uint64_t size() const override { return bytes_.size(); }
  const std::string& path() const override { return path_; }

 private:
  std::vector<std::byte> bytes_;
  std::string path_;
};

template <class T>
T peek(const std::vector<std::byte>& bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

template <class T>
void poke(std::vector<std::byte>& bytes, std::size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// Half compressible (slowly varying bytes), half pseudo-random, so that a
// compressing pipeline stores some chunks compressed and some raw.
std::vector<std::byte> region_data(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::byte> data(bytes);
  std::uint64_t state = 0x9e3779b97f4a7c15ull ^ seed;
  for (std::size_t i = 0; i < bytes; ++i) {
    if (i < bytes / 2) {
      data[i] = static_cast<std::byte>((i / 64 + seed) % 7);
    } else {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      data[i] = static_cast<std::byte>(state >> 56);
    }
  }
  return data;
}

std::vector<std::byte> text_bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

Header sample_header() {
  Header header;
  header.store = "roundtrip";
  header.version = 42;
  header.rank = 3;
  header.base_version = -1;
  header.created_unix_ns = 1'700'000'000'123'456'789ull;
  header.regions = {
      RegionEntry{0, "temperature", RegionKind::kHost, 8 * 100 * 37, "float64", {100, 37}},
      RegionEntry{3, "ids", RegionKind::kManaged, 4 * 1001, "int32", {1001}},
      RegionEntry{7, "blob", RegionKind::kDevice, 70001, "", {}},
      RegionEntry{9, "empty", RegionKind::kHost, 0, "uint8", {0}},
  };
  header.metadata = text_bytes("step=42;dt=0.5");
  header.metadata.push_back(std::byte{0});
  header.metadata.push_back(std::byte{0xff});
  return header;
}

std::vector<std::vector<std::byte>> sample_data(const Header& header) {
  std::vector<std::vector<std::byte>> data;
  for (std::size_t r = 0; r < header.regions.size(); ++r) {
    data.push_back(region_data(header.regions[r].bytes, static_cast<std::uint32_t>(r + 1)));
  }
  return data;
}

std::vector<const std::byte*> sources_of(const std::vector<std::vector<std::byte>>& data) {
  std::vector<const std::byte*> sources;
  for (const auto& region : data) sources.push_back(region.data());
  return sources;
}

// Writes a container with write_version, syncs and closes it.
std::uint64_t write_with_pipeline(const std::string& path, const Header& header,
                                  const std::vector<std::vector<std::byte>>& data, const Config::Pipeline& pipeline) {
  ThreadPool pool(1);
  Env::posix()->remove(path);  // a store never overwrites: neither does the test
  auto file = Env::posix()->create(path, 0600);
  const std::uint64_t size = write_version(*file, header, sources_of(data), pipeline, pool);
  file->sync();
  file->close();
  return size;
}

Config::Pipeline pipeline_with(Codec codec, std::uint64_t chunk_size) {
  Config::Pipeline pipeline;
  pipeline.compress = codec;
  pipeline.compress_level = 3;
  pipeline.chunk_size = chunk_size;
  return pipeline;
}

void expect_same_header(const Header& actual, const Header& expected) {
  EXPECT_EQ(actual.store, expected.store);
  EXPECT_EQ(actual.version, expected.version);
  EXPECT_EQ(actual.rank, expected.rank);
  EXPECT_EQ(actual.base_version, expected.base_version);
  EXPECT_EQ(actual.created_unix_ns, expected.created_unix_ns);
  EXPECT_EQ(actual.chunk_size, expected.chunk_size);
  EXPECT_EQ(actual.metadata, expected.metadata);
  ASSERT_EQ(actual.regions.size(), expected.regions.size());
  for (std::size_t r = 0; r < expected.regions.size(); ++r) {
    SCOPED_TRACE("region " + expected.regions[r].label);
    EXPECT_EQ(actual.regions[r].id, expected.regions[r].id);
    EXPECT_EQ(actual.regions[r].label, expected.regions[r].label);
    EXPECT_EQ(actual.regions[r].kind, expected.regions[r].kind);
    EXPECT_EQ(actual.regions[r].bytes, expected.regions[r].bytes);
    EXPECT_EQ(actual.regions[r].dtype, expected.regions[r].dtype);
    EXPECT_EQ(actual.regions[r].shape, expected.regions[r].shape);
  }
}

// Reads every chunk back into fresh buffers (filled with a marker first).
std::vector<std::vector<std::byte>> read_all(const ReadableFile& file, const Container& container) {
  std::vector<std::vector<std::byte>> out;
  for (const RegionEntry& region : container.header.regions) out.emplace_back(region.bytes, std::byte{0xa5});
  std::vector<std::byte> scratch;
  for (const ChunkRecord& chunk : container.chunks) {
    format::read_chunk(file, container, chunk, out[chunk.region].data() + chunk.offset, scratch);
  }
  return out;
}

struct Sections {
  std::uint64_t header_length = 0;
  std::uint64_t index_offset = 0;
  std::uint64_t index_length = 0;
};

Sections sections_of(const std::vector<std::byte>& file) {
  Sections s;
  s.header_length = peek<std::uint64_t>(file, 16);
  const std::size_t footer = file.size() - kFooter;
  EXPECT_EQ(peek<std::uint64_t>(file, footer), s.header_length);
  s.index_offset = peek<std::uint64_t>(file, footer + 8);
  s.index_length = peek<std::uint64_t>(file, footer + 16);
  EXPECT_EQ(s.index_offset + s.index_length, footer);
  return s;
}

std::vector<std::byte> footer_for(std::uint64_t header_length, std::uint64_t index_offset, std::uint64_t index_length,
                                  std::uint64_t checksum) {
  std::vector<std::byte> footer;
  format::ByteWriter out(footer);
  out.put(header_length);
  out.put(index_offset);
  out.put(index_length);
  out.put(checksum);
  out.put_bytes("RSGFOOT\0", 8);
  return footer;
}

std::uint64_t xxh3(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  std::vector<std::byte> joined = a;
  joined.insert(joined.end(), b.begin(), b.end());
  return XXH3_64bits(joined.data(), joined.size());
}

// Rewrites the index of a valid file through `edit` and appends a footer
// whose checksum matches the edited index, so only the layout checks remain
// to notice what was changed.
std::vector<std::byte> with_index(const std::vector<std::byte>& file,
                                  const std::function<void(std::vector<std::byte>&)>& edit) {
  const Sections s = sections_of(file);
  std::vector<std::byte> index(file.begin() + static_cast<std::ptrdiff_t>(s.index_offset),
                               file.begin() + static_cast<std::ptrdiff_t>(s.index_offset + s.index_length));
  edit(index);
  const std::vector<std::byte> header(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(s.header_length));
  std::vector<std::byte> out(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(s.index_offset));
  out.insert(out.end(), index.begin(), index.end());
  const auto footer = footer_for(s.header_length, s.index_offset, index.size(), xxh3(header, index));
  out.insert(out.end(), footer.begin(), footer.end());
  return out;
}

std::size_t entry(std::size_t i, std::size_t field) { return 8 + i * kEntry + field; }

// Runs `body` and returns the exception it threw: 'F' FormatError,
// 'C' CorruptionError, 'O' another exception, '-' none.
char outcome(const std::function<void()>& body, std::string* message = nullptr) {
  try {
    body();
  } catch (const FormatError& e) {
    if (message) *message = e.what();
    return 'F';
  } catch (const CorruptionError& e) {
    if (message) *message = e.what();
    return 'C';
  } catch (const std::exception& e) {
    if (message) *message = e.what();
    return 'O';
  }
  return '-';
}

// ------------------------------------------------------------ round trips

class FormatRoundTrip : public ::testing::TestWithParam<std::tuple<Codec, std::uint64_t>> {
 protected:
  TempDir dir;
};

TEST_P(FormatRoundTrip, WriteVersionThenReadEveryChunk) {
  const auto [codec, chunk_size] = GetParam();
  Header header = sample_header();
  header.chunk_size = chunk_size;
  const auto data = sample_data(header);
  const std::string path = dir.path() + "/v.rsg";
  const std::uint64_t size = write_with_pipeline(path, header, data, pipeline_with(codec, chunk_size));
  EXPECT_EQ(size, fs::file_size(path));

  auto file = Env::posix()->open(path);
  const Container container = format::read_container(*file);
  expect_same_header(container.header, header);
  EXPECT_EQ(container.file_size, size);
  EXPECT_LT(container.index_offset, size);

  // Every non-empty region is cut into ceil(bytes / chunk_size) chunks of at
  // most chunk_size bytes, written in region order.
  std::size_t expected_chunks = 0;
  for (const RegionEntry& region : header.regions) expected_chunks += (region.bytes + chunk_size - 1) / chunk_size;
  ASSERT_EQ(container.chunks.size(), expected_chunks);
  int compressed = 0;
  int raw = 0;
  for (std::size_t i = 0; i < container.chunks.size(); ++i) {
    const ChunkRecord& chunk = container.chunks[i];
    EXPECT_LE(chunk.raw_length, chunk_size);
    EXPECT_GT(chunk.raw_length, 0u);
    if (i > 0) {
      EXPECT_GT(chunk.file_offset, container.chunks[i - 1].file_offset);
    }
    if (chunk.codec == Codec::kNone) {
      ++raw;
      EXPECT_EQ(chunk.stored_length, chunk.raw_length);
    } else {
      ++compressed;
      EXPECT_EQ(chunk.codec, codec);
      EXPECT_LT(chunk.stored_length, chunk.raw_length);
    }
  }
  if (codec == Codec::kNone) {
    EXPECT_EQ(compressed, 0);
  } else {
    EXPECT_GT(compressed, 0) << "the compressible halves should compress";
    // With small chunks, some hold only random bytes, which do not compress.
    if (chunk_size <= 4096) {
      EXPECT_GT(raw, 0) << "random chunks are stored raw";
    }
  }

  EXPECT_EQ(read_all(*file, container), data);

  std::uint64_t calls = 0;
  std::uint64_t last_done = 0;
  std::uint64_t last_total = 0;
  format::verify_chunks(*file, container, [&](std::uint64_t done, std::uint64_t total) {
    EXPECT_GT(done, last_done);
    last_done = done;
    last_total = total;
    ++calls;
  });
  EXPECT_EQ(calls, container.chunks.size());
  const std::uint64_t total = 8 * 100 * 37 + 4 * 1001 + 70001;
  EXPECT_EQ(last_done, total);
  EXPECT_EQ(last_total, total);
}

INSTANTIATE_TEST_SUITE_P(Format, FormatRoundTrip,
                         ::testing::Combine(::testing::Values(Codec::kNone, Codec::kLz4, Codec::kZstd,
                                                              Codec::kBloscLz4, Codec::kBloscZstd),
                                            ::testing::Values(std::uint64_t{4096}, std::uint64_t{3000},
                                                              std::uint64_t{1} << 20)));

TEST(FormatTest, ContainerWriterAcceptsChunksInAnyOrderAndMixedCodecs) {
  TempDir dir;
  Header header = sample_header();
  header.chunk_size = 1000;
  header.base_version = 41;  // a delta names its base
  const auto data = sample_data(header);
  // Plan the chunks, then write them last region first, highest offset first.
  struct Planned {
    ChunkRecord record;
    std::vector<std::byte> stored;
  };
  std::vector<Planned> planned;
  int n = 0;
  for (std::uint32_t r = 0; r < header.regions.size(); ++r) {
    for (std::uint64_t offset = 0; offset < header.regions[r].bytes; offset += 1000) {
      Planned p;
      p.record.region = r;
      p.record.offset = offset;
      p.record.raw_length = std::min<std::uint64_t>(1000, header.regions[r].bytes - offset);
      const std::byte* raw = data[r].data() + offset;
      const Codec wanted = n % 3 == 0 ? Codec::kNone : (n % 3 == 1 ? Codec::kLz4 : Codec::kZstd);
      ++n;
      if (format::encode({wanted, 1}, raw, p.record.raw_length, p.stored)) {
        p.record.codec = wanted;
      } else {
        p.stored.assign(raw, raw + p.record.raw_length);
        p.record.codec = Codec::kNone;
      }
      p.record.stored_length = p.stored.size();
      p.record.checksum = format::checksum(p.stored.data(), p.stored.size());
      planned.push_back(std::move(p));
    }
  }
  std::reverse(planned.begin(), planned.end());
  const std::string path = dir.path() + "/direct.rsg";
  std::uint64_t written = 0;
  {
    auto file = Env::posix()->create(path, 0600);
    format::ContainerWriter writer(*file, header);
    for (const Planned& p : planned) writer.add_chunk(p.record, p.stored.data());
    writer.finish();
    written = writer.bytes_written();
    writer.finish();  // idempotent
    EXPECT_EQ(writer.bytes_written(), written);
    file->close();
  }
  EXPECT_EQ(written, fs::file_size(path));

  auto file = Env::posix()->open(path);
  const Container container = format::read_container(*file);
  expect_same_header(container.header, header);
  ASSERT_EQ(container.chunks.size(), planned.size());
  for (std::size_t i = 0; i < planned.size(); ++i) {
    EXPECT_EQ(container.chunks[i].region, planned[i].record.region);
    EXPECT_EQ(container.chunks[i].offset, planned[i].record.offset);
    EXPECT_EQ(container.chunks[i].codec, planned[i].record.codec);
    EXPECT_EQ(container.chunks[i].checksum, planned[i].record.checksum);
  }
  EXPECT_EQ(read_all(*file, container), data);
}

TEST(FormatTest, EmptyContainerRoundTrips) {
  TempDir dir;
  Header header;
  header.store = "s";
  header.version = 0;
  const std::string path = dir.path() + "/empty.rsg";
  {
    auto file = Env::posix()->create(path, 0600);
    format::ContainerWriter writer(*file, header);
    writer.finish();
    file->close();
  }
  auto file = Env::posix()->open(path);
  const Container container = format::read_container(*file);
  EXPECT_EQ(container.header.store, "s");
  EXPECT_TRUE(container.header.regions.empty());
  EXPECT_TRUE(container.chunks.empty());
  EXPECT_TRUE(container.header.metadata.empty());
}

TEST(FormatTest, CodecsRoundTripAndRefuseWrongSizes) {
  const auto raw = region_data(10000, 5);
  for (Codec codec : {Codec::kLz4, Codec::kZstd}) {
    SCOPED_TRACE(to_string(codec));
    std::vector<std::byte> stored;
    ASSERT_TRUE(format::encode({codec, 1}, raw.data(), raw.size(), stored));
    EXPECT_LT(stored.size(), raw.size());
    std::vector<std::byte> back(raw.size());
    EXPECT_TRUE(format::decode(codec, stored.data(), stored.size(), back.data(), back.size()));
    EXPECT_EQ(back, raw);
    std::vector<std::byte> shorter(raw.size() - 1);
    EXPECT_FALSE(format::decode(codec, stored.data(), stored.size(), shorter.data(), shorter.size()));
    EXPECT_FALSE(format::decode(codec, stored.data(), stored.size() / 2, back.data(), back.size()));
  }
  std::vector<std::byte> stored;
  EXPECT_FALSE(format::encode({Codec::kNone, 1}, raw.data(), raw.size(), stored));
  EXPECT_STREQ(to_string(Codec::kNone), "none");
  EXPECT_STREQ(to_string(Codec::kLz4), "lz4");
  EXPECT_STREQ(to_string(Codec::kZstd), "zstd");
  EXPECT_TRUE(format::codec_is_known(4));
  EXPECT_FALSE(format::codec_is_known(5));
}

// --------------------------------------------------------- damage on disk

class FormatDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    header_ = sample_header();
    header_.chunk_size = 4096;
    data_ = sample_data(header_);
    path_ = dir_.path() + "/v.rsg";
    write_with_pipeline(path_, header_, data_, pipeline_with(Codec::kNone, 4096));
    original_ = read_file(path_);
    sections_ = sections_of(original_);
    auto file = Env::posix()->open(path_);
    container_ = format::read_container(*file);
  }
  void expect_container_fails(char kind) {
    auto file = Env::posix()->open(path_);
    std::string message;
    EXPECT_EQ(outcome([&] { format::read_container(*file); }, &message), kind) << message;
    EXPECT_NE(message.find(path_), std::string::npos) << message;
  }

  TempDir dir_;
  Header header_;
  std::vector<std::vector<std::byte>> data_;
  std::string path_;
  std::vector<std::byte> original_;
  Sections sections_;
  Container container_;
};

TEST_F(FormatDamage, BitFlipInHeaderIsCorruption) {
  flip_bit(path_, 30, 2);  // inside the store name
  expect_container_fails('C');
}

TEST_F(FormatDamage, BitFlipInFlagsAndHeaderLengthIsCorruption) {
  flip_bit(path_, 12, 0);  // flags: covered by the checksum
  expect_container_fails('C');
  write_file(path_, original_);
  flip_bit(path_, 16, 3);  // header length disagrees with the footer
  expect_container_fails('C');
}

TEST_F(FormatDamage, BitFlipInIndexIsCorruption) {
  flip_bit(path_, sections_.index_offset + 8 + kEntryChecksum, 5);
  expect_container_fails('C');
}

TEST_F(FormatDamage, BitFlipInFooterIsCorruption) {
  const std::uint64_t footer = original_.size() - kFooter;
  for (std::uint64_t field : {0, 8, 16, 24, 32}) {
    SCOPED_TRACE("footer byte " + std::to_string(field));
    write_file(path_, original_);
    flip_bit(path_, footer + field, 1);
    expect_container_fails('C');
  }
}

TEST_F(FormatDamage, BitFlipInChunkDataFailsOnlyThatChunk) {
  const ChunkRecord& victim = container_.chunks[2];
  flip_bit(path_, victim.file_offset + victim.stored_length / 2, 6);
  auto file = Env::posix()->open(path_);
  const Container container = format::read_container(*file);  // the header and index are intact
  std::vector<std::byte> scratch;
  for (std::size_t i = 0; i < container.chunks.size(); ++i) {
    const ChunkRecord& chunk = container.chunks[i];
    std::vector<std::byte> out(chunk.raw_length);
    if (i == 2) {
      std::string message;
      EXPECT_EQ(outcome([&] { format::read_chunk(*file, container, chunk, out.data(), scratch); }, &message), 'C');
      EXPECT_NE(message.find(path_), std::string::npos) << message;
      EXPECT_NE(message.find(header_.regions[chunk.region].label), std::string::npos) << message;
    } else {
      format::read_chunk(*file, container, chunk, out.data(), scratch);
      const auto& region = data_[chunk.region];
      EXPECT_TRUE(std::equal(out.begin(), out.end(), region.begin() + static_cast<std::ptrdiff_t>(chunk.offset)));
    }
  }
  EXPECT_THROW(format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {}), CorruptionError);
}

TEST_F(FormatDamage, UnsupportedFormatVersionIsFormatError) {
  for (std::uint32_t version : {0u, format::kDeviceFormatVersion + 1, 0xffffffffu}) {
    std::vector<std::byte> bytes = original_;
    poke(bytes, 8, version);
    write_file(path_, bytes);
    auto file = Env::posix()->open(path_);
    std::string message;
    EXPECT_EQ(outcome([&] { format::read_container(*file); }, &message), 'F') << message;
    EXPECT_NE(message.find(path_), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(version)), std::string::npos) << message;
  }
}

TEST_F(FormatDamage, TruncationOnDiskIsDetectedAndNamesThePath) {
  for (std::size_t length : {std::size_t{0}, std::size_t{7}}) {
    write_file(path_, std::vector<std::byte>(original_.begin(), original_.begin() + static_cast<std::ptrdiff_t>(length)));
    expect_container_fails('F');
  }
  for (std::size_t length : {std::size_t{8}, std::size_t{24}, std::size_t{63}, std::size_t{64},
                             static_cast<std::size_t>(sections_.header_length), original_.size() / 2,
                             static_cast<std::size_t>(sections_.index_offset), original_.size() - kFooter,
                             original_.size() - 1}) {
    SCOPED_TRACE("length " + std::to_string(length));
    write_file(path_, std::vector<std::byte>(original_.begin(), original_.begin() + static_cast<std::ptrdiff_t>(length)));
    expect_container_fails('C');
  }
}

TEST_F(FormatDamage, TrailingGarbageIsCorruption) {
  std::vector<std::byte> bytes = original_;
  bytes.insert(bytes.end(), 100, std::byte{0});
  write_file(path_, bytes);
  expect_container_fails('C');
}

TEST_F(FormatDamage, ForeignFilesAreFormatErrors) {
  write_file(path_, text_bytes("[local]\npath = \"/tmp\"\nthis is a text file, not a checkpoint\n"));
  expect_container_fails('F');
  std::mt19937 random(7);
  std::vector<std::byte> noise(4096);
  for (auto& b : noise) b = static_cast<std::byte>(random() & 0xff);
  write_file(path_, noise);
  expect_container_fails('F');
  write_file(path_, text_bytes("RSGCKPT"));  // a prefix of the magic
  expect_container_fails('F');
  // Magic and format version alone do not make a container: the rest is damage.
  std::vector<std::byte> magic_then_noise = text_bytes(std::string("RSGCKPT\0\1\0\0\0", 12));
  magic_then_noise.insert(magic_then_noise.end(), noise.begin(), noise.end());
  write_file(path_, magic_then_noise);
  expect_container_fails('C');
}

TEST_F(FormatDamage, SwappedChunksOfEqualLengthFailTheirChecksums) {
  // chunks 0 and 1 of region "temperature": 4096 raw bytes each, different contents
  const ChunkRecord a = container_.chunks[0];
  const ChunkRecord b = container_.chunks[1];
  ASSERT_EQ(a.stored_length, b.stored_length);
  std::vector<std::byte> bytes = original_;
  std::swap_ranges(bytes.begin() + static_cast<std::ptrdiff_t>(a.file_offset),
                   bytes.begin() + static_cast<std::ptrdiff_t>(a.file_offset + a.stored_length),
                   bytes.begin() + static_cast<std::ptrdiff_t>(b.file_offset));
  ASSERT_NE(bytes, original_);
  write_file(path_, bytes);
  auto file = Env::posix()->open(path_);
  const Container container = format::read_container(*file);
  std::vector<std::byte> out(a.raw_length);
  std::vector<std::byte> scratch;
  EXPECT_THROW(format::read_chunk(*file, container, container.chunks[0], out.data(), scratch), CorruptionError);
  EXPECT_THROW(format::read_chunk(*file, container, container.chunks[1], out.data(), scratch), CorruptionError);
  EXPECT_NO_THROW(format::read_chunk(*file, container, container.chunks[2], out.data(), scratch));
}

// --------------------------------------------------- exhaustive sweeps in memory

// A small container with compressed and raw chunks in several regions.
std::vector<std::byte> small_container(Container* parsed = nullptr,
                                       std::vector<std::vector<std::byte>>* data_out = nullptr) {
  Header header;
  header.store = "sweep";
  header.version = 5;
  header.chunk_size = 512;
  header.regions = {RegionEntry{0, "a", RegionKind::kHost, 1300, "float32", {325}},
                    RegionEntry{1, "b", RegionKind::kHost, 700, "", {}}};
  header.metadata = text_bytes("meta");
  const auto data = sample_data(header);
  TempDir dir;
  const std::string path = dir.path() + "/small.rsg";
  write_with_pipeline(path, header, data, pipeline_with(Codec::kZstd, 512));
  std::vector<std::byte> bytes = read_file(path);
  if (parsed) *parsed = format::read_container(MemoryFile(bytes, "mem"));
  if (data_out) *data_out = data;
  return bytes;
}

TEST(FormatSweep, EveryBitFlipIsDetectedWhereItMatters) {
  Container original;
  std::vector<std::vector<std::byte>> data;
  const std::vector<std::byte> bytes = small_container(&original, &data);
  const Sections s = sections_of(bytes);
  bool saw_compressed = false;
  for (const ChunkRecord& c : original.chunks) saw_compressed |= c.codec == Codec::kZstd;
  ASSERT_TRUE(saw_compressed);

  for (std::size_t offset = 0; offset < bytes.size(); ++offset) {
    SCOPED_TRACE("byte " + std::to_string(offset));
    std::vector<std::byte> damaged = bytes;
    damaged[offset] ^= static_cast<std::byte>(1u << (offset % 8));
    const MemoryFile file(damaged, "mem://sweep");
    const ChunkRecord* hit = nullptr;
    for (const ChunkRecord& c : original.chunks) {
      if (offset >= c.file_offset && offset < c.file_offset + c.stored_length) hit = &c;
    }
    const bool in_data_section = offset >= s.header_length && offset < s.index_offset;
    // Byte 8's flip turns format version 2 into 3, which is read: the
    // header then fails its checksum, as for the header's other bytes.
    if (offset < 12 && offset != 8) {  // magic and format version
      EXPECT_EQ(outcome([&] { format::read_container(file); }), 'F');
    } else if (!in_data_section) {  // header, index, footer
      std::string message;
      EXPECT_EQ(outcome([&] { format::read_container(file); }, &message), 'C') << message;
      EXPECT_NE(message.find("mem://sweep"), std::string::npos) << message;
    } else if (hit != nullptr) {  // stored bytes of one chunk
      Container container;
      ASSERT_EQ(outcome([&] { container = format::read_container(file); }), '-');
      std::vector<std::byte> out(hit->raw_length);
      std::vector<std::byte> scratch;
      const std::size_t index = static_cast<std::size_t>(hit - original.chunks.data());
      EXPECT_EQ(outcome([&] { format::read_chunk(file, container, container.chunks[index], out.data(), scratch); }),
                'C');
    } else {  // a chunk record prefix: redundant with the index; damage there must not return wrong data
      std::vector<std::vector<std::byte>> back;
      const char result = outcome([&] { back = read_all(file, format::read_container(file)); });
      EXPECT_TRUE(result == 'C' || (result == '-' && back == data)) << result;
    }
  }
}

TEST(FormatSweep, EveryTruncationIsDetected) {
  const std::vector<std::byte> bytes = small_container();
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("length " + std::to_string(length));
    const MemoryFile file(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)),
                          "mem://truncated");
    EXPECT_EQ(outcome([&] { format::read_container(file); }), length < 8 ? 'F' : 'C');
  }
}

// ------------------------------------------------------------ hostile headers

// A header with a valid prefix whose fields after the prefix are written by `body`.
std::vector<std::byte> raw_header(const std::function<void(format::ByteWriter&)>& body) {
  std::vector<std::byte> bytes;
  format::ByteWriter out(bytes);
  out.put_bytes("RSGCKPT\0", 8);
  out.put(std::uint32_t{1});
  out.put(std::uint32_t{0});
  out.put(std::uint64_t{0});
  body(out);
  poke(bytes, 16, static_cast<std::uint64_t>(bytes.size()));
  return bytes;
}

void common_fields(format::ByteWriter& out) {
  out.put_string("hostile");
  out.put(std::int64_t{1});   // version
  out.put(std::uint32_t{0});  // rank
  out.put(std::int64_t{-1});  // base version
  out.put(std::uint64_t{0});  // created
  out.put(std::uint64_t{4096});
}

void region_prefix(format::ByteWriter& out) {  // one region, up to its label
  out.put(std::uint32_t{1});  // region count
  out.put(std::int32_t{0});
}

// header | index | footer, with a footer checksum that matches.
std::vector<std::byte> assemble(const std::vector<std::byte>& header,
                                std::vector<std::byte> index = std::vector<std::byte>(8, std::byte{0})) {
  std::vector<std::byte> file = header;
  file.insert(file.end(), index.begin(), index.end());
  const auto footer = footer_for(header.size(), header.size(), index.size(), xxh3(header, index));
  file.insert(file.end(), footer.begin(), footer.end());
  return file;
}

TEST(FormatHostile, BuilderMakesValidFiles) {
  const auto file = assemble(raw_header([](format::ByteWriter& out) {
    common_fields(out);
    region_prefix(out);
    out.put_string("x");
    out.put(std::uint8_t{0});
    out.put(std::uint64_t{0});
    out.put_string("");
    out.put(std::uint32_t{0});
    out.put(std::uint64_t{3});
    out.put_bytes("abc", 3);
  }));
  const Container container = format::read_container(MemoryFile(file, "mem"));
  EXPECT_EQ(container.header.store, "hostile");
  ASSERT_EQ(container.header.regions.size(), 1u);
  EXPECT_EQ(container.header.regions[0].label, "x");
  EXPECT_EQ(container.header.metadata, text_bytes("abc"));
}

TEST(FormatHostile, HugeLengthsAreRefusedBeforeAllocating) {
  struct Case {
    const char* name;
    const char* expected;  // part of the message naming the cause
    std::vector<std::byte> file;
  };
  std::vector<Case> cases;
  cases.push_back({"store name 2^32-1", "store name", assemble(raw_header([](format::ByteWriter& out) {
                     out.put(std::uint32_t{0xffffffff});
                     out.put_bytes("abc", 3);
                   }))});
  cases.push_back({"region count 2^32-1", "region count", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     out.put(std::uint32_t{0xffffffff});
                     out.put(std::uint64_t{0});
                   }))});
  cases.push_back({"label 2^31", "label", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     region_prefix(out);
                     out.put(std::uint32_t{1u << 31});
                     out.put_bytes(std::string(40, 'L').data(), 40);
                   }))});
  cases.push_back({"label 256", "label", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     region_prefix(out);
                     out.put_string(std::string(256, 'L'));
                     out.put_bytes(std::string(40, 'x').data(), 40);
                   }))});
  cases.push_back({"dtype 2^20", "dtype", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     region_prefix(out);
                     out.put_string("x");
                     out.put(std::uint8_t{0});
                     out.put(std::uint64_t{0});
                     out.put(std::uint32_t{1u << 20});
                     out.put_bytes(std::string(40, 'x').data(), 40);
                   }))});
  cases.push_back({"shape rank 2^31", "rank", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     region_prefix(out);
                     out.put_string("x");
                     out.put(std::uint8_t{0});
                     out.put(std::uint64_t{0});
                     out.put_string("");
                     out.put(std::uint32_t{1u << 31});
                     out.put_bytes(std::string(40, 'x').data(), 40);
                   }))});
  cases.push_back({"region kind 9", "kind", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     region_prefix(out);
                     out.put_string("x");
                     out.put(std::uint8_t{9});
                     out.put_bytes(std::string(40, 'x').data(), 40);
                   }))});
  cases.push_back({"metadata 2^40", "metadata", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     out.put(std::uint32_t{0});
                     out.put(std::uint64_t{1} << 40);
                     out.put_bytes("xyz", 3);
                   }))});
  cases.push_back({"trailing header bytes", "trailing", assemble(raw_header([](format::ByteWriter& out) {
                     common_fields(out);
                     out.put(std::uint32_t{0});
                     out.put(std::uint64_t{0});
                     out.put_bytes("xyz", 3);
                   }))});
  const auto minimal = raw_header([](format::ByteWriter& out) {
    common_fields(out);
    out.put(std::uint32_t{0});
    out.put(std::uint64_t{0});
  });
  {
    std::vector<std::byte> index(8);
    poke(index, 0, std::uint64_t{1} << 61);
    cases.push_back({"chunk count 2^61", "chunks", assemble(minimal, index)});
  }
  {
    // Header length 2^60 in both the prefix and the footer.
    std::vector<std::byte> header = minimal;
    poke(header, 16, std::uint64_t{1} << 60);
    std::vector<std::byte> file = assemble(header);
    poke(file, file.size() - kFooter, std::uint64_t{1} << 60);
    cases.push_back({"header length 2^60", "layout", file});
  }
  {
    std::vector<std::byte> file = assemble(minimal);
    poke(file, file.size() - kFooter + 16, std::uint64_t{1} << 62);  // index length
    cases.push_back({"index length 2^62", "layout", file});
  }
  {
    std::vector<std::byte> file = assemble(minimal);
    poke(file, file.size() - kFooter + 8, std::uint64_t{1} << 62);  // index offset
    cases.push_back({"index offset 2^62", "layout", file});
  }
  ASSERT_NO_THROW(format::read_container(MemoryFile(assemble(minimal), "mem")));

  const auto start = std::chrono::steady_clock::now();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string message;
    const MemoryFile file(c.file, "mem://hostile");
    largest_allocation = 0;
    probing_allocations = true;
    const char result = outcome([&] { format::read_container(file); }, &message);
    probing_allocations = false;
    EXPECT_EQ(result, 'C') << message;
    EXPECT_GT(largest_allocation, 0u);  // the probe sees the reader's allocations
    EXPECT_LE(largest_allocation, c.file.size() + 4096) << "allocated " << largest_allocation << " bytes";
    EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    EXPECT_NE(message.find("mem://hostile"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A crafted file may claim a huge region covered by one compressed chunk.
// The lengths agree with each other and the checksums match, but a chunk
// can never be larger than the header's chunk size (nor decompress to more
// than its codec allows): verification must report damage instead of trying
// to allocate the claimed size.
TEST(FormatHostile, VerifyBoundsChunkLengthsBeforeAllocating) {
  const std::uint64_t claimed = std::uint64_t{1} << 50;  // more than any address space
  Header header;
  header.store = "hostile";
  header.version = 1;
  header.chunk_size = 4096;
  header.regions = {RegionEntry{0, "huge", RegionKind::kHost, claimed, "", {}}};
  const std::vector<std::byte> zeros(4096);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({Codec::kZstd, 1}, zeros.data(), zeros.size(), stored));
  ChunkRecord chunk;
  chunk.region = 0;
  chunk.offset = 0;
  chunk.raw_length = claimed;
  chunk.stored_length = stored.size();
  chunk.codec = Codec::kZstd;
  chunk.checksum = format::checksum(stored.data(), stored.size());
  TempDir dir;
  const std::string path = dir.path() + "/huge.rsg";
  {
    auto file = Env::posix()->create(path, 0600);
    format::ContainerWriter writer(*file, header);
    writer.add_chunk(chunk, stored.data());
    writer.finish();
    file->close();
  }
  auto file = Env::posix()->open(path);
  std::string message;
  const char result = outcome(
      [&] {
        const Container container = format::read_container(*file);
        format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
      },
      &message);
  EXPECT_EQ(result, 'C') << "expected CorruptionError, got " << (result == 'O' ? message : std::string(1, result));
}

// ------------------------------------------------------------- delta versions

// A delta (base_version >= 0) holds sparse extents: each inside its region,
// none overlapping another of its region; gaps and zero chunks are fine.
class FormatDelta : public ::testing::Test {
 protected:
  struct Piece {
    std::uint32_t region;
    std::uint64_t offset;
    std::uint64_t bytes;
  };
  // Writes version 9 of base `base` holding `pieces` (uncompressed) and reads it back.
  Container write_and_read(std::int64_t base, const std::vector<Piece>& pieces) {
    Header header;
    header.store = "delta";
    header.version = 9;
    header.base_version = base;
    header.chunk_size = 1000;
    header.regions = {RegionEntry{0, "a", RegionKind::kHost, 2500, "", {}},
                      RegionEntry{1, "b", RegionKind::kHost, 1000, "", {}}};
    {
      Env::posix()->remove(path_);
      auto file = Env::posix()->create(path_, 0600);
      format::ContainerWriter writer(*file, header);
      for (const Piece& piece : pieces) {
        const std::vector<std::byte> bytes = region_data(piece.bytes, piece.region + 1);
        ChunkRecord chunk;
        chunk.region = piece.region;
        chunk.offset = piece.offset;
        chunk.raw_length = piece.bytes;
        chunk.stored_length = piece.bytes;
        chunk.checksum = format::checksum(bytes.data(), bytes.size());
        writer.add_chunk(chunk, bytes.data());
      }
      writer.finish();
      file->close();
    }
    auto file = Env::posix()->open(path_);
    const Container container = format::read_container(*file);
    format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
    return container;
  }
  void expect_corrupt(const char* name, std::int64_t base, const std::vector<Piece>& pieces, const char* why) {
    SCOPED_TRACE(name);
    try {
      write_and_read(base, pieces);
      ADD_FAILURE() << "accepted";
    } catch (const CorruptionError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(path_), std::string::npos) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
    }
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/delta.rsg";
};

TEST_F(FormatDelta, SparseExtentsWithGapsAreAccepted) {
  const Container delta = write_and_read(8, {{0, 2000, 500}, {0, 100, 900}, {1, 999, 1}, {0, 1000, 1000}});
  EXPECT_TRUE(format::is_delta(delta.header));
  EXPECT_EQ(delta.header.base_version, 8);
  EXPECT_EQ(delta.chunks.size(), 4u);
  EXPECT_TRUE(write_and_read(0, {}).chunks.empty());  // nothing written since the base
  EXPECT_FALSE(format::is_delta(write_and_read(-1, {{0, 0, 1000}, {0, 1000, 1000}, {0, 2000, 500}, {1, 0, 1000}})
                                    .header));
}

TEST_F(FormatDelta, ViolationsAreCorruption) {
  expect_corrupt("overlap", 8, {{0, 0, 600}, {0, 500, 600}}, "overlapping chunks at byte 500");
  expect_corrupt("same extent twice", 8, {{1, 0, 10}, {1, 0, 10}}, "overlapping");
  expect_corrupt("past the region", 8, {{1, 900, 101}}, "outside region 'b'");
  expect_corrupt("larger than a chunk", 8, {{0, 0, 1001}}, "larger than the chunk size");
  expect_corrupt("base is the version", 9, {{0, 0, 10}}, "base version 9 of version 9");
  expect_corrupt("base is newer", 10, {}, "base version 10");
  expect_corrupt("base below -1", -2, {}, "base version -2");
  expect_corrupt("full version with a gap", -1, {{0, 0, 1000}, {0, 2000, 500}, {1, 0, 1000}}, "gap at byte 1000");
}

TEST(FormatRegionTables, DifferenceNamesWhatDiffers) {
  Header base = sample_header();
  Header delta = base;
  EXPECT_EQ(format::region_table_difference(delta, base), "");
  delta.regions[1].bytes += 4;
  EXPECT_NE(format::region_table_difference(delta, base).find("'ids'"), std::string::npos);
  delta = base;
  delta.regions[2].shape = {1};
  EXPECT_NE(format::region_table_difference(delta, base), "");
  delta = base;
  delta.regions.pop_back();
  EXPECT_EQ(format::region_table_difference(delta, base), "3 regions against 4");
}

// ------------------------------------------------------ chunk layout violations

class FormatLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    header_.store = "layout";
    header_.version = 9;
    header_.chunk_size = 1000;
    header_.regions = {RegionEntry{0, "a", RegionKind::kHost, 2500, "", {}},
                       RegionEntry{1, "b", RegionKind::kHost, 1000, "", {}}};
    data_ = sample_data(header_);
    path_ = dir_.path() + "/layout.rsg";
    write_with_pipeline(path_, header_, data_, pipeline_with(Codec::kNone, 1000));
    original_ = read_file(path_);
    sections_ = sections_of(original_);
    // chunks: a@0, a@1000, a@2000 (500 bytes), b@0
    ASSERT_EQ(peek<std::uint64_t>(original_, sections_.index_offset), 4u);
  }
  // Applies `edit` to the index, fixes the footer, and reads the file.
  char read_edited(const std::function<void(std::vector<std::byte>&)>& edit, std::string* message) {
    write_file(path_, with_index(original_, edit));
    auto file = Env::posix()->open(path_);
    return outcome([&] { read_all(*file, format::read_container(*file)); }, message);
  }
  void expect_corrupt(const char* name, const std::function<void(std::vector<std::byte>&)>& edit) {
    SCOPED_TRACE(name);
    std::string message;
    EXPECT_EQ(read_edited(edit, &message), 'C') << message;
    EXPECT_NE(message.find(path_), std::string::npos) << message;
  }

  TempDir dir_;
  Header header_;
  std::vector<std::vector<std::byte>> data_;
  std::string path_;
  std::vector<std::byte> original_;
  Sections sections_;
};

TEST_F(FormatLayout, UneditedIndexWithRecomputedFooterReads) {
  std::string message;
  EXPECT_EQ(read_edited([](std::vector<std::byte>&) {}, &message), '-') << message;
}

TEST_F(FormatLayout, ViolationsAreCorruption) {
  const std::uint64_t index_offset = sections_.index_offset;
  expect_corrupt("overlap", [](auto& ix) { poke(ix, entry(1, kEntryOffset), std::uint64_t{999}); });
  expect_corrupt("gap", [](auto& ix) { poke(ix, entry(1, kEntryOffset), std::uint64_t{1001}); });
  expect_corrupt("outside region", [](auto& ix) { poke(ix, entry(2, kEntryOffset), std::uint64_t{2001}); });
  expect_corrupt("offset overflow", [](auto& ix) { poke(ix, entry(2, kEntryOffset), ~std::uint64_t{0} - 100); });
  expect_corrupt("raw length past region", [](auto& ix) {
    poke(ix, entry(3, kEntryRaw), std::uint64_t{1001});
    poke(ix, entry(3, kEntryStored), std::uint64_t{1001});
  });
  expect_corrupt("unknown region", [](auto& ix) { poke(ix, entry(3, kEntryRegion), std::uint32_t{2}); });
  expect_corrupt("zero length", [](auto& ix) {
    poke(ix, entry(3, kEntryRaw), std::uint64_t{0});
    poke(ix, entry(3, kEntryStored), std::uint64_t{0});
  });
  expect_corrupt("duplicate chunk", [](auto& ix) {
    std::memcpy(ix.data() + entry(1, 0), ix.data() + entry(0, 0), kEntry);
  });
  expect_corrupt("short coverage", [](auto& ix) {
    poke(ix, entry(2, kEntryRaw), std::uint64_t{400});
    poke(ix, entry(2, kEntryStored), std::uint64_t{400});
  });
  expect_corrupt("data in the index", [index_offset](auto& ix) {
    poke(ix, entry(0, kEntryFileOffset), index_offset - 10);
  });
  expect_corrupt("data in the header", [](auto& ix) { poke(ix, entry(0, kEntryFileOffset), std::uint64_t{0}); });
  expect_corrupt("data past the end", [](auto& ix) { poke(ix, entry(0, kEntryFileOffset), ~std::uint64_t{0} - 10); });
  expect_corrupt("stored length differs for raw chunk",
                 [](auto& ix) { poke(ix, entry(3, kEntryStored), std::uint64_t{999}); });
  expect_corrupt("stored length past the index", [](auto& ix) {
    poke(ix, entry(3, kEntryStored), std::uint64_t{1} << 40);
    poke(ix, entry(3, kEntryCodec), static_cast<std::uint8_t>(Codec::kZstd));
  });
  expect_corrupt("unknown codec", [](auto& ix) { poke(ix, entry(0, kEntryCodec), std::uint8_t{5}); });
  expect_corrupt("chunk magic", [](auto& ix) { poke(ix, entry(0, kEntryMagic), std::uint32_t{0x12345678}); });
  expect_corrupt("count mismatch", [](auto& ix) { poke(ix, 0, std::uint64_t{5}); });
  expect_corrupt("missing chunk", [](auto& ix) {  // region b is not covered
    ix.resize(ix.size() - kEntry);
    poke(ix, 0, std::uint64_t{3});
  });
  expect_corrupt("odd index size", [](auto& ix) { ix.push_back(std::byte{0}); });
}

TEST_F(FormatLayout, WrongChecksumInIndexFailsTheChunk) {
  // A consistent index (footer recomputed) whose chunk checksum is wrong:
  // read_container accepts it, read_chunk refuses the data.
  write_file(path_, with_index(original_, [](auto& ix) {
               poke(ix, entry(1, kEntryChecksum), peek<std::uint64_t>(ix, entry(1, kEntryChecksum)) ^ 1u);
             }));
  auto file = Env::posix()->open(path_);
  const Container container = format::read_container(*file);
  std::vector<std::byte> out(1000);
  std::vector<std::byte> scratch;
  EXPECT_NO_THROW(format::read_chunk(*file, container, container.chunks[0], out.data(), scratch));
  EXPECT_THROW(format::read_chunk(*file, container, container.chunks[1], out.data(), scratch), CorruptionError);
}

// Stored bytes that match their checksum but do not decode are damage too.
class FormatUndecodable : public ::testing::TestWithParam<Codec> {};

TEST_P(FormatUndecodable, IsCorruption) {
  TempDir dir;
  Header header;
  header.store = "undecodable";
  header.chunk_size = 4096;
  header.regions = {RegionEntry{0, "z", RegionKind::kHost, 8192, "", {}}};
  const std::vector<std::vector<std::byte>> data = {std::vector<std::byte>(8192, std::byte{3})};
  const std::string path = dir.path() + "/u.rsg";
  write_with_pipeline(path, header, data, pipeline_with(GetParam(), 4096));
  std::vector<std::byte> bytes = read_file(path);
  Container container = format::read_container(MemoryFile(bytes, "mem"));
  ASSERT_EQ(container.chunks.size(), 2u);
  ASSERT_EQ(container.chunks[0].codec, GetParam());
  // Zero the stored bytes of chunk 0 and give it the matching checksum. A
  // zstd chunk keeps its 7-byte frame header (magic 4, descriptor 1, content
  // size 2 for 4096 bytes): without it, it is no zstd frame, which breaks
  // the format (docs/format.md, step 7) rather than failing to decode.
  const ChunkRecord victim = container.chunks[0];
  const std::uint64_t kept = GetParam() == Codec::kZstd ? 7 : 0;
  std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(victim.file_offset + kept), victim.stored_length - kept,
              std::byte{0});
  const std::byte* stored = bytes.data() + victim.file_offset;
  const std::uint64_t sum = format::checksum(stored, victim.stored_length);
  bytes = with_index(bytes, [&](auto& ix) { poke(ix, entry(0, kEntryChecksum), sum); });
  write_file(path, bytes);
  auto file = Env::posix()->open(path);
  container = format::read_container(*file);
  std::vector<std::byte> out(4096);
  std::vector<std::byte> scratch;
  std::string message;
  EXPECT_EQ(outcome([&] { format::read_chunk(*file, container, container.chunks[0], out.data(), scratch); }, &message),
            'C');
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find(to_string(GetParam())), std::string::npos) << message;
  EXPECT_NO_THROW(format::read_chunk(*file, container, container.chunks[1], out.data(), scratch));
  EXPECT_EQ(out, std::vector<std::byte>(4096, std::byte{3}));
}

INSTANTIATE_TEST_SUITE_P(Format, FormatUndecodable, ::testing::Values(Codec::kLz4, Codec::kZstd));

// ContainerWriter into a file that AppendsInMemory (the memory level's):
// chunks are appended from where they lie, not gathered into a buffer
// first (one copy fewer per small chunk), and the container is the same
// bytes as one written with gathering; damage is still found at read.

// Keeps the bytes and where each append read them from.
class GatherRecordingFile : public WritableFile {
 public:
  void append(const void* data, std::size_t bytes) override {
    const auto* from = static_cast<const std::byte*>(data);
    sources.push_back({from, bytes});
    contents.insert(contents.end(), from, from + bytes);
  }
  void sync() override {}
  void close() override {}
  const std::string& path() const override { return path_; }

  struct Append {
    const std::byte* data;
    std::size_t bytes;
  };
  std::vector<Append> sources;
  std::vector<std::byte> contents;

 private:
  std::string path_ = "recording";
};

class GatherInMemoryFile final : public GatherRecordingFile, public format::AppendsInMemory {
 public:
  std::uint64_t append_hashed(const void* data, std::size_t bytes) override {
    append(data, bytes);
    return format::checksum(data, bytes);
  }
  std::uint64_t longest_run() const override { return ~std::uint64_t{0}; }
  void overwrite_appended(std::uint64_t offset, const void* data, std::size_t bytes) override {
    std::memcpy(contents.data() + offset, data, bytes);
  }
};

// One region in chunks of 4 KiB and 64 KiB, which a file's writer gathers,
// and 300 KiB, which it appends as they are.
struct GatherChunks {
  GatherChunks() : data(kSizes[0] + kSizes[1] + kSizes[2]) {
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 131 % 251);
    header.store = "s";
    header.version = 1;
    header.chunk_size = kSizes[2];
    header.regions.push_back({0, "u", format::RegionKind::kHost, data.size(), "", {}});
  }

  // `damaged`: the chunk (index) whose bytes change after their checksum is taken.
  void write(WritableFile& file, int damaged = -1) {
    format::ContainerWriter writer(file, header);
    std::uint64_t offset = 0;
    for (int i = 0; i < 3; ++i) {
      const std::uint64_t sum = format::checksum(data.data() + offset, kSizes[i]);
      if (i == damaged) data[offset + kSizes[i] / 2] ^= std::byte{0x10};
      writer.add_chunk({0, offset, kSizes[i], kSizes[i], Codec::kNone, sum, 0}, data.data() + offset);
      offset += kSizes[i];
    }
    writer.finish();
  }

  static constexpr std::uint64_t kSizes[3] = {4u << 10, 64u << 10, 300u << 10};
  std::vector<std::byte> data;
  format::Header header;
};

bool gather_appended_from(const GatherRecordingFile& file, const std::byte* data, std::size_t bytes) {
  for (const auto& append : file.sources) {
    if (append.data == data && append.bytes == bytes) return true;
  }
  return false;
}

TEST(ContainerInMemory, AppendsEachChunkFromWhereItLiesAndWritesTheSameBytes) {
  GatherChunks chunks;
  GatherRecordingFile gathered;
  chunks.write(gathered);
  GatherInMemoryFile direct;
  chunks.write(direct);
  EXPECT_EQ(direct.contents, gathered.contents);
  std::uint64_t offset = 0;
  for (std::uint64_t bytes : GatherChunks::kSizes) {
    EXPECT_TRUE(gather_appended_from(direct, chunks.data.data() + offset, bytes)) << "chunk of " << bytes << " bytes";
    offset += bytes;
  }
  // A file's writer gathers the small chunks: one system call per MiB.
  EXPECT_FALSE(gather_appended_from(gathered, chunks.data.data(), GatherChunks::kSizes[0]));
  EXPECT_FALSE(gather_appended_from(gathered, chunks.data.data() + GatherChunks::kSizes[0], GatherChunks::kSizes[1]));
}

// add_raw_chunk computes the checksum itself (in memory: while it appends,
// then writes it into the record) and writes the bytes add_chunk does.
TEST(ContainerInMemory, ARawChunkHashedByTheWriterWritesTheSameBytes) {
  GatherChunks chunks;
  GatherInMemoryFile given;
  chunks.write(given);
  GatherInMemoryFile in_memory;
  GatherRecordingFile in_a_file;
  for (WritableFile* file : std::initializer_list<WritableFile*>{&in_memory, &in_a_file}) {
    format::ContainerWriter writer(*file, chunks.header);
    std::uint64_t offset = 0;
    for (std::uint64_t bytes : GatherChunks::kSizes) {
      writer.add_raw_chunk({0, offset, bytes, bytes, Codec::kNone, 0, 0}, chunks.data.data() + offset);
      offset += bytes;
    }
    writer.finish();
  }
  EXPECT_EQ(in_memory.contents, given.contents);
  EXPECT_EQ(in_a_file.contents, given.contents);
}

TEST(ContainerInMemory, MemoryLevelReadsBackEveryChunkAndFindsADamagedOne) {
  for (int damaged : {-1, 0, 1, 2}) {
    SCOPED_TRACE("damaged chunk " + std::to_string(damaged));
    GatherChunks chunks;
    const std::vector<std::byte> original = chunks.data;
    MemoryLevel level("s", 0, 8u << 20, 2);
    level.commit(1, [&](WritableFile& file) { chunks.write(file, damaged); });
    const auto file = level.open(1);
    const format::Container container = format::read_container(*file);
    ASSERT_EQ(container.chunks.size(), 3u);
    std::vector<std::byte> scratch;
    for (std::size_t i = 0; i < container.chunks.size(); ++i) {
      const format::ChunkRecord& chunk = container.chunks[i];
      std::vector<std::byte> back(chunk.raw_length);
      if (static_cast<int>(i) == damaged) {
        EXPECT_THROW(format::read_chunk(*file, container, chunk, back.data(), scratch), CorruptionError);
        continue;
      }
      format::read_chunk(*file, container, chunk, back.data(), scratch);
      EXPECT_EQ(std::memcmp(back.data(), original.data() + chunk.offset, back.size()), 0) << "chunk " << i;
    }
  }
}

}  // namespace
}  // namespace resurgo
