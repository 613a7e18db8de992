// Chunk codecs: every codec x shuffle x element size round trips, element
// sizes from dtype names, early abort of incompressible chunks, and hostile
// blosc chunks whose own header contradicts the chunk record.
#include <blosc.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "format/codec.h"
#include "format/container.h"
#include "format/element_size.h"
#include "format/compress_probe.h"
#include "base/thread_pool.h"
#include "format/version_writer.h"
#include "io/bytes_file.h"
#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

using format::ChunkRecord;
using format::Container;
using format::EncodeParams;
using format::Header;
using format::RegionEntry;
using format::RegionKind;

constexpr Codec kCompressingCodecs[] = {Codec::kLz4, Codec::kZstd, Codec::kBloscLz4, Codec::kBloscZstd};

// A numeric array of `element_size`-byte little-endian integers whose values
// repeat every 97 elements and share their high bytes (compressible with or
// without a shuffle), cut to `bytes`, which need not be a multiple of the
// element size.
std::vector<std::byte> numeric_data(std::size_t bytes, std::size_t element_size) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::uint64_t value = 1000003u + (i / element_size % 97) * 7u;
    data[i] = static_cast<std::byte>(value >> (8 * (i % element_size)));
  }
  return data;
}

std::vector<std::byte> random_data(std::size_t bytes, std::uint32_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t value = generator();
    std::memcpy(data.data() + i, &value, std::min<std::size_t>(8, bytes - i));
  }
  return data;
}

// ------------------------------------------------------------ round trips

class CodecRoundTrip : public ::testing::TestWithParam<std::tuple<Codec, Shuffle, std::size_t, std::size_t>> {};

// Lengths 8000 (a multiple of every element size) and 8000 + 1, 3 or 5 bytes.
TEST_P(CodecRoundTrip, DecodesToTheSameBytes) {
  const auto [codec, shuffle, element_size, extra] = GetParam();
  const auto raw = numeric_data(8000 + extra, element_size);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({codec, 3, shuffle, element_size}, raw.data(), raw.size(), stored))
      << "smooth numeric data should compress";
  EXPECT_LT(stored.size(), raw.size());
  std::vector<std::byte> back(raw.size());
  ASSERT_TRUE(format::decode(codec, stored.data(), stored.size(), back.data(), back.size()));
  EXPECT_EQ(back, raw);
  EXPECT_EQ(format::framing_mismatch(codec, stored.data(), stored.size(), raw.size()), "");
  if (codec == Codec::kBloscLz4 || codec == Codec::kBloscZstd) {
    // blosc recorded the requested filter and element size in its header.
    std::size_t typesize = 0;
    int flags = 0;
    blosc_cbuffer_metainfo(stored.data(), &typesize, &flags);
    EXPECT_EQ(typesize, element_size);
    EXPECT_EQ((flags & BLOSC_DOBITSHUFFLE) != 0, shuffle == Shuffle::kBit);
    EXPECT_EQ((flags & BLOSC_DOSHUFFLE) != 0, shuffle == Shuffle::kByte);
  }
}

INSTANTIATE_TEST_SUITE_P(Codec, CodecRoundTrip,
                         ::testing::Combine(::testing::ValuesIn(kCompressingCodecs),
                                            ::testing::Values(Shuffle::kNone, Shuffle::kByte, Shuffle::kBit),
                                            ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4},
                                                              std::size_t{8}),
                                            ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{3},
                                                              std::size_t{5})),
                         [](const auto& test) {
                           std::string name = std::string(to_string(std::get<0>(test.param))) + "_" +
                                              to_string(std::get<1>(test.param)) + "_e" +
                                              std::to_string(std::get<2>(test.param)) + "_plus" +
                                              std::to_string(std::get<3>(test.param));
                           std::replace(name.begin(), name.end(), '-', '_');  // test names are identifiers
                           return name;
                         });

TEST(CodecTest, NamesAndIds) {
  EXPECT_STREQ(to_string(Codec::kBloscLz4), "blosc-lz4");
  EXPECT_STREQ(to_string(Codec::kBloscZstd), "blosc-zstd");
  EXPECT_EQ(static_cast<int>(Codec::kBloscLz4), 3);
  EXPECT_EQ(static_cast<int>(Codec::kBloscZstd), 4);
  EXPECT_TRUE(format::codec_is_known(4));
  EXPECT_FALSE(format::codec_is_known(5));
}

TEST(CodecTest, ElementSizeFromDtype) {
  EXPECT_EQ(format::element_size("float32"), 4u);
  EXPECT_EQ(format::element_size("float64"), 8u);
  EXPECT_EQ(format::element_size("float16"), 2u);
  EXPECT_EQ(format::element_size("bfloat16"), 2u);
  EXPECT_EQ(format::element_size("int16"), 2u);
  EXPECT_EQ(format::element_size("uint8"), 1u);
  EXPECT_EQ(format::element_size("uint64"), 8u);
  EXPECT_EQ(format::element_size("complex128"), 16u);
  EXPECT_EQ(format::element_size("bool"), 1u);
  EXPECT_EQ(format::element_size("datetime64[ns]"), 8u);
  EXPECT_EQ(format::element_size("timedelta64"), 8u);
  for (const char* unknown : {"", "object", "float", "int7", "int0", "int16x", "str160", "uint99999999999999999999"}) {
    EXPECT_EQ(format::element_size(unknown), 1u) << unknown;
  }
}

// A region whose byte size is not a multiple of its dtype's element size:
// blosc shuffles the whole elements and keeps the leftover bytes as they are.
TEST(CodecTest, ShuffleElementSizeThatDoesNotDivideTheRegion) {
  Header header;
  header.store = "odd";
  header.chunk_size = 65539;                  // no chunk holds whole float64s only
  const std::size_t bytes = 4 * 65539 + 1001;  // 4 full chunks and one of 1001 bytes
  header.regions = {RegionEntry{0, "field", RegionKind::kHost, bytes, "float64", {}}};
  const auto data = numeric_data(bytes, 8);
  for (Codec codec : {Codec::kBloscLz4, Codec::kBloscZstd}) {
    for (Shuffle shuffle : {Shuffle::kByte, Shuffle::kBit}) {
      SCOPED_TRACE(std::string(to_string(codec)) + " " + to_string(shuffle));
      Config::Pipeline pipeline;
      pipeline.compress = codec;
      pipeline.shuffle = shuffle;
      pipeline.chunk_size = header.chunk_size;
      BytesFile file("mem://codec");
      ThreadPool pool(1);
      write_version(file, header, {data.data()}, pipeline, pool);
      const Container container = format::read_container(file);
      EXPECT_EQ(container.chunks.size(), 5u);
      std::vector<std::byte> back(bytes);
      std::vector<std::byte> scratch;
      for (const ChunkRecord& chunk : container.chunks) {
        EXPECT_EQ(chunk.codec, codec) << "chunk at " << chunk.offset;
        std::vector<std::byte> head(BLOSC_MIN_HEADER_LENGTH);
        file.read_at(chunk.file_offset, head.data(), head.size());
        std::size_t typesize = 0;
        int flags = 0;
        blosc_cbuffer_metainfo(head.data(), &typesize, &flags);
        EXPECT_EQ(typesize, 8u) << "the element size of float64";
        format::read_chunk(file, container, chunk, back.data() + chunk.offset, scratch);
      }
      EXPECT_EQ(back, data);
    }
  }
}

// ------------------------------------------------------------ early abort

TEST(CompressProbe, SampleDecidesWhetherToCompress) {
  const std::size_t bytes = 1u << 20;
  const auto smooth = numeric_data(bytes, 4);
  const auto noise = random_data(bytes, 1);
  for (Codec codec : kCompressingCodecs) {
    SCOPED_TRACE(to_string(codec));
    const EncodeParams params{codec, 1, Shuffle::kByte, 4};
    EXPECT_TRUE(sample_compresses(params, smooth.data(), smooth.size()));
    EXPECT_FALSE(sample_compresses(params, noise.data(), noise.size()));
    // Too small for a sample to pay: always tried whole.
    EXPECT_TRUE(sample_compresses(params, noise.data(), 64u << 10));
  }
}

// Random bytes never compress: every chunk is stored raw after compressing
// only its 32 KiB sample, never the whole chunk; compressible chunks of the
// same version are compressed as before.
TEST(CompressProbe, IncompressibleChunksAreStoredRawByEarlyAbort) {
  constexpr std::uint64_t kChunk = 1u << 20;
  Header header;
  header.store = "abort";
  header.chunk_size = kChunk;
  header.regions = {RegionEntry{0, "noise", RegionKind::kHost, 8 * kChunk, "float32", {}},
                    RegionEntry{1, "smooth", RegionKind::kHost, 2 * kChunk + 4108, "float32", {}}};
  const auto noise = random_data(8 * kChunk, 7);
  const auto smooth = numeric_data(2 * kChunk + 4108, 4);
  for (Codec codec : kCompressingCodecs) {
    SCOPED_TRACE(to_string(codec));
    Config::Pipeline pipeline;
    pipeline.compress = codec;
    pipeline.chunk_size = kChunk;
    BytesFile file("mem://codec");
    ThreadPool pool(1);
    WriteResult result;
    const std::uint64_t size = write_version(file, header, {noise.data(), smooth.data()}, pipeline, pool, &result);
    EXPECT_EQ(result.file_bytes, size);
    EXPECT_EQ(result.chunks, 11u);
    EXPECT_EQ(result.chunks_raw_early_abort, 8u) << "only the random chunks are aborted";
    const Container container = format::read_container(file);
    std::vector<std::byte> back(noise.size());
    std::vector<std::byte> scratch;
    for (const ChunkRecord& chunk : container.chunks) {
      EXPECT_EQ(chunk.codec, chunk.region == 0 ? Codec::kNone : codec) << "chunk at " << chunk.offset;
      if (chunk.region == 0) format::read_chunk(file, container, chunk, back.data() + chunk.offset, scratch);
    }
    EXPECT_EQ(back, noise);
  }
}

TEST(CompressProbe, NoCodecMeansNoEarlyAbort) {
  Header header;
  header.store = "plain";
  header.chunk_size = 1u << 20;
  header.regions = {RegionEntry{0, "noise", RegionKind::kHost, 2u << 20, "", {}}};
  const auto noise = random_data(2u << 20, 3);
  Config::Pipeline pipeline;
  pipeline.chunk_size = 1u << 20;
  BytesFile file("mem://codec");
  ThreadPool pool(1);
  WriteResult result;
  write_version(file, header, {noise.data()}, pipeline, pool, &result);
  EXPECT_EQ(result.chunks, 2u);
  EXPECT_EQ(result.chunks_raw_early_abort, 0u);
}

// ------------------------------------------------------------ hostile blosc chunks

// One region of `raw_length` bytes covered by one chunk whose stored bytes
// are `stored` under `codec`, with a matching checksum: only the codec's own
// header can tell that something is wrong.
BytesFile container_with(Codec codec, const std::vector<std::byte>& stored, std::uint64_t raw_length) {
  Header header;
  header.store = "hostile";
  header.chunk_size = 1u << 20;
  header.regions = {RegionEntry{0, "victim", RegionKind::kHost, raw_length, "float64", {}}};
  ChunkRecord chunk;
  chunk.raw_length = raw_length;
  chunk.stored_length = stored.size();
  chunk.codec = codec;
  chunk.checksum = format::checksum(stored.data(), stored.size());
  BytesFile file("mem://codec");
  format::ContainerWriter writer(file, header);
  writer.add_chunk(chunk, stored.data());
  writer.finish();
  return file;
}

// The FormatError message of reading the only chunk of `file`, or "".
std::string read_error(const BytesFile& file, std::uint64_t raw_length) {
  const Container container = format::read_container(file);
  std::vector<std::byte> out(raw_length);
  std::vector<std::byte> scratch;
  try {
    format::read_chunk(file, container, container.chunks.at(0), out.data(), scratch);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

void expect_names_the_chunk(const std::string& message) {
  EXPECT_NE(message.find("mem://codec"), std::string::npos) << message;
  EXPECT_NE(message.find("chunk at byte 0 of region 'victim'"), std::string::npos) << message;
}

TEST(CodecHostile, BloscHeaderClaimingAnotherSizeIsFormatError) {
  const auto raw = numeric_data(16384, 8);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({Codec::kBloscLz4, 1, Shuffle::kByte, 8}, raw.data(), raw.size(), stored));
  for (std::uint64_t claimed : {std::uint64_t{8192}, std::uint64_t{16383}, std::uint64_t{65536}}) {
    SCOPED_TRACE(claimed);
    const std::string message = read_error(container_with(Codec::kBloscLz4, stored, claimed), claimed);
    expect_names_the_chunk(message);
    EXPECT_NE(message.find("announces 16384 bytes but the chunk holds " + std::to_string(claimed)),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(read_error(container_with(Codec::kBloscLz4, stored, 16384), 16384), "") << "the intact chunk reads";
}

TEST(CodecHostile, BloscHeaderNamingAnotherCompressorIsFormatError) {
  const auto raw = numeric_data(16384, 4);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({Codec::kBloscZstd, 1, Shuffle::kBit, 4}, raw.data(), raw.size(), stored));
  const std::string message = read_error(container_with(Codec::kBloscLz4, stored, 16384), 16384);
  expect_names_the_chunk(message);
  EXPECT_NE(message.find("names compressor 'Zstd', not LZ4"), std::string::npos) << message;
}

TEST(CodecHostile, InvalidBloscHeaderIsFormatError) {
  const auto raw = numeric_data(16384, 2);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({Codec::kBloscLz4, 1, Shuffle::kByte, 2}, raw.data(), raw.size(), stored));
  // The header's compressed size no longer matches the stored length.
  std::vector<std::byte> cut(stored.begin(), stored.end() - 1);
  std::string message = read_error(container_with(Codec::kBloscLz4, cut, 16384), 16384);
  expect_names_the_chunk(message);
  EXPECT_NE(message.find("blosc header is invalid"), std::string::npos) << message;
  // Shorter than any blosc header.
  const std::vector<std::byte> tiny(7, std::byte{0x02});
  message = read_error(container_with(Codec::kBloscZstd, tiny, 16384), 16384);
  expect_names_the_chunk(message);
  EXPECT_NE(message.find("blosc header is invalid"), std::string::npos) << message;
}

// A valid header over damaged blocks passes the header checks; blosc then
// refuses to decode, which is damage like an undecodable lz4 or zstd chunk.
TEST(CodecHostile, BloscDataThatDoesNotDecodeIsCorruption) {
  const auto raw = numeric_data(65536, 8);
  std::vector<std::byte> stored;
  ASSERT_TRUE(format::encode({Codec::kBloscLz4, 1, Shuffle::kByte, 8}, raw.data(), raw.size(), stored));
  std::fill(stored.begin() + BLOSC_MIN_HEADER_LENGTH, stored.end(), std::byte{0xff});
  const BytesFile file = container_with(Codec::kBloscLz4, stored, 65536);
  const Container container = format::read_container(file);
  std::vector<std::byte> out(65536);
  std::vector<std::byte> scratch;
  EXPECT_THROW(format::read_chunk(file, container, container.chunks.at(0), out.data(), scratch), CorruptionError);
}

}  // namespace
}  // namespace resurgo
