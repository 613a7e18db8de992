// Hostile containers (docs/format.md, "Limits"): chunks claiming more raw
// bytes than their stored bytes can decode to, checksums and codec framing
// checked before a decode buffer is sized, region counts and headers beyond
// the limits.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "bounded_child.h"
#include "format/codec.h"
#include "format/container.h"
#include "format/file_names.h"
#include "base/printable.h"
#include "hostile_files.h"
#include "io/bytes_file.h"
#include "refusal.h"
#include "resurgo/errors.hpp"
#include "resurgo/tools.hpp"
#include "test_util.h"

namespace resurgo::security {
namespace {

constexpr std::uint64_t kGiB = 1u << 30;
constexpr Codec kCompressingCodecs[] = {Codec::kLz4, Codec::kZstd, Codec::kBloscLz4, Codec::kBloscZstd};

class HostileContainer : public ::testing::Test {
 protected:
  void write(const std::vector<std::byte>& bytes) { write_file(path_, bytes); }
  // Reads the file with `read` in a child capped at a reader's budget for it.
  ChildOutcome bounded(const std::function<void()>& read) {
    return run_bounded(reader_budget(std::filesystem::file_size(path_)), read);
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/v0000000001.r000000.rsg";  // version 1, rank 0: what the files hold
};

// The review's file: under 300 bytes, a zstd chunk claiming 1 GiB, for
// which `resurgo verify` sized a 1 GiB buffer before the checksum failed.
TEST_F(HostileContainer, ZstdBombIsRefusedBeforeAnyChunkIsRead) {
  const auto bytes = one_chunk_container(Codec::kZstd, kGiB, compressed_zeros(Codec::kZstd, 4096), true);
  EXPECT_LE(bytes.size(), 300u);
  write(bytes);
  const ChildOutcome outcome = bounded([&] { tools::verify(path_); });
  ASSERT_EQ(outcome.kind, ChildOutcome::Kind::kRefused) << describe(outcome);
  expect_mentions(outcome.message,
                  {path_, "chunk at byte 0 of region 'bomb'", "claims 1073741824 raw bytes", "zstd"});
}

TEST_F(HostileContainer, EveryCodecCapsTheRawLengthByItsRatio) {
  for (Codec codec : kCompressingCodecs) {
    SCOPED_TRACE(to_string(codec));
    write(one_chunk_container(codec, kGiB, compressed_zeros(codec, 64u << 10), false));
    expect_mentions(refusal<CorruptionError>([&] { tools::inspect(path_); }),
                    {path_, "chunk at byte 0 of region 'bomb'", "can decode to", to_string(codec)});
  }
}

// The ratios are the codecs' own: the writer's best compression (zeros, at
// a high level) stays within them, so no file a store writes is refused.
TEST(CodecRatios, AdmitWhatTheCodecsWrite) {
  constexpr std::size_t kBytes = 64u << 20;
  for (Codec codec : kCompressingCodecs) {
    const std::vector<std::byte> stored = compressed_zeros(codec, kBytes);
    EXPECT_LE(kBytes, format::max_decoded_bytes(codec, stored.size()))
        << to_string(codec) << " compressed " << kBytes << " bytes to " << stored.size();
  }
  EXPECT_EQ(format::max_decoded_bytes(Codec::kNone, 1000), 1000u);
  EXPECT_EQ(format::max_decoded_bytes(Codec::kZstd, std::uint64_t{1} << 62), ~std::uint64_t{0});  // saturates
}

// Within the ratio (64 MiB from 2100 stored bytes of zstd) but failing its
// checksum: refused before a buffer of 64 MiB is sized, within the budget
// of a reader of a 2 KiB file.
TEST_F(HostileContainer, VerifyChecksTheChecksumBeforeSizingTheDecodeBuffer) {
  write(one_chunk_container(Codec::kZstd, 64u << 20, std::vector<std::byte>(2100, std::byte{0x5a}), true));
  ASSERT_NO_THROW(tools::inspect(path_));
  const ChildOutcome outcome = bounded([&] { tools::verify(path_); });
  ASSERT_EQ(outcome.kind, ChildOutcome::Kind::kRefused) << describe(outcome);
  expect_mentions(outcome.message, {path_, "chunk at byte 0 of region 'bomb'", "fails its checksum"});
}

// With a right checksum, the zstd frame itself must declare the raw length
// before anything is sized by it: the file breaks the format.
TEST_F(HostileContainer, ZstdFrameMustDeclareTheRawLength) {
  write(one_chunk_container(Codec::kZstd, 64u << 20, std::vector<std::byte>(2100, std::byte{0x5a}), false));
  ChildOutcome outcome = bounded([&] { tools::verify(path_); });
  ASSERT_EQ(outcome.kind, ChildOutcome::Kind::kRefused) << describe(outcome);
  expect_mentions(outcome.message, {path_, "bomb", "not a zstd frame"});

  write(one_chunk_container(Codec::kZstd, 8192, compressed_zeros(Codec::kZstd, 4096), false));
  expect_mentions(refusal<FormatError>([&] { tools::verify(path_); }),
                  {path_, "chunk at byte 0 of region 'bomb'", "declares 4096 bytes", "holds 8192"});
}

TEST_F(HostileContainer, RegionCountBeyondTheLimitIsRefused) {
  write(container_with_region_table(minimal_region_table(0xffffffff, 2)));
  expect_mentions(refusal<CorruptionError>([&] { tools::inspect(path_); }),
                  {path_, "region count 4294967295 exceeds the limit of 65536 regions"});
  // The header holds every entry; the limit still refuses them.
  write(container_with_region_table(minimal_region_table(65537, 65537)));
  expect_mentions(refusal<CorruptionError>([&] { tools::inspect(path_); }),
                  {path_, "region count 65537 exceeds the limit"});
  write(container_with_region_table(minimal_region_table(65536, 65536)));
  EXPECT_EQ(tools::inspect(path_).regions.size(), 65536u);
}

// The review's 65 MB header took 1.8 GB and 11 s in `inspect`. Whether it
// claims millions of regions or holds the most allowed followed by junk,
// it is refused in well under a second, within a reader's budget.
TEST_F(HostileContainer, A65MegabyteHeaderFailsFastWithinTheBudget) {
  constexpr std::size_t kHeaderBytes = 65'000'000;
  std::vector<std::byte> at_the_limit = minimal_region_table(65536, 65536);
  at_the_limit.resize(kHeaderBytes);  // trailing bytes after the metadata
  const struct {
    const char* name;
    std::vector<std::byte> table;
    const char* cause;
  } cases[] = {{"millions of regions", minimal_region_table(kHeaderBytes / 25, kHeaderBytes / 25), "region count"},
               {"65536 regions and junk", std::move(at_the_limit), "trailing bytes"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    write(container_with_region_table(c.table));
    const auto start = std::chrono::steady_clock::now();
    const ChildOutcome outcome = bounded([&] { tools::inspect(path_); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    ASSERT_EQ(outcome.kind, ChildOutcome::Kind::kRefused) << describe(outcome);
    expect_mentions(outcome.message, {path_, c.cause});
  }
}

TEST(HostileLimits, TheWriterRefusesMoreRegionsThanReadersAccept) {
  format::Header header;
  header.store = "many";
  header.regions.resize(format::kMaxRegions + 1);
  BytesFile file("many regions");
  expect_mentions(refusal<InvalidArgumentError>([&] { format::ContainerWriter writer(file, header); }),
                  {"store 'many'", "65537 regions", "more than the 65536"});
}

// A label is whatever bytes the file holds: the message names it with its
// control characters and non-UTF-8 bytes escaped, and keeps the rest.
TEST_F(HostileContainer, MessagesEscapeWhatTheFileHolds) {
  format::Header header;
  header.store = "s";
  header.version = 1;
  header.chunk_size = 64;
  header.regions = {format::RegionEntry{0, "t\xc3\xa9\x1b[31m\xff\xc2\x9b\xe2\x80\xa8", format::RegionKind::kHost, 64, "", {}}};
  HostileChunk chunk;
  chunk.record.raw_length = 64;
  chunk.stored = std::vector<std::byte>(64);
  chunk.wrong_checksum = true;
  write(container_with(header, {chunk}));
  const std::string message = refusal<CorruptionError>([&] { tools::verify(path_); });
  expect_mentions(message, {"region 't\xc3\xa9\\x1b[31m\\xff\\xc2\\x9b\\xe2\\x80\\xa8'", "fails its checksum"});
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
}

TEST(HostileText, PrintableKeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(printable("temp\xc3\xa9rature \xe2\x82\xac \xf0\x9f\x98\x80"), "temp\xc3\xa9rature \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable(std::string("a\0b\n\x7f", 5)), "a\\x00b\\x0a\\x7f");
  EXPECT_EQ(printable("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82"),  // overlong, surrogate, > U+10FFFF, cut
            "\\xc0\\xaf \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80 \\xe2\\x82");
  const std::string cut = printable(std::string(10000, 'p'));
  EXPECT_EQ(cut, std::string(kMaxPrintableBytes, 'p') + "... (10000 bytes)");
}

// Names come from directory listings another user may fill: only what the
// writer writes parses, with no integer overflow (sscanf's and atoi's were
// undefined).
TEST(HostileNames, OnlyNamesTheWriterWritesParse) {
  int version = -1;
  int rank = -1;
  EXPECT_TRUE(format::parse_container_file_name("v2147483647.r999999.rsg", version, rank));
  EXPECT_EQ(version, 2147483647);
  EXPECT_EQ(rank, 999999);
  for (const char* name : {"v2147483648.r000000.rsg", "v9999999999.r000000.rsg", "v+000000001.r000000.rsg",
                           "v 000000001.r000000.rsg", "v-000000001.r000000.rsg", "v0000000001.r-00001.rsg",
                           "v0000000001.r000000.rsh", "v0000000001.r000000.rsg.damaged", "../00000001.r000000.rsg"}) {
    EXPECT_FALSE(format::parse_container_file_name(name, version, rank)) << name;
  }
  EXPECT_TRUE(format::parse_manifest_file_name("v0000000012.job", version));
  EXPECT_EQ(version, 12);
  EXPECT_FALSE(format::parse_manifest_file_name("v9999999999.job", version));
  EXPECT_EQ(format::temporary_owner(".v0000000001.r000000.rsg.tmp-4242.0123abcd"), 4242);
  EXPECT_EQ(format::temporary_owner(".v0000000001.r000000.rsg.tmp-99999999999999999999.0123abcd"), std::nullopt);
}

}  // namespace
}  // namespace resurgo::security
