// resurgo/tools.hpp: a store's files read without the store (inspect,
// verify, read_region, read_manifest, file names), damage refused naming the
// file, and write_container's files read back. Only public headers: what the
// command-line tool and the Python package can do, this test does.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "resurgo/resurgo.hpp"
#include "resurgo/tools.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

std::string container_name(int version) {
  char name[64];
  std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, 0);
  return name;
}

std::vector<std::byte> bytes_of(const void* data, std::size_t size) {
  const auto* begin = static_cast<const std::byte*>(data);
  return {begin, begin + size};
}

std::vector<std::byte> read_whole_region(const std::string& path, int region_id) {
  std::vector<std::byte> out;
  tools::read_region(path, region_id, [&out](std::uint64_t bytes) {
    out.resize(bytes);
    return static_cast<void*>(out.data());
  });
  return out;
}

// What `call` throws, as CorruptionError, must name `path`.
template <class Call>
void expect_corruption_naming(const std::string& path, Call&& call) {
  try {
    call();
    ADD_FAILURE() << "no CorruptionError for " << path;
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
  }
}

// Version 3 of store "s" in the L2 directory: region 0 "u" (8 x 16 float64),
// region 1 "v" (100 int32), metadata "t=1".
class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::iota(u.begin(), u.end(), 0.5);
    std::iota(v.begin(), v.end(), -7);
    Store store("s", Config::load("", {{"local.path", dir.path() + "/l2"},
                                       {"persistent.path", dir.path() + "/l4"},
                                       {"log.level", "off"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u", ElementType{"float64", {8, 16}});
    store.protect(1, v.data(), v.size() * sizeof(std::int32_t), "v", ElementType{"int32", {100}});
    store.set_metadata("t=1", 3);
    store.checkpoint(3);
    store.wait(3, kL2);
  }
  std::string store_dir() const { return dir.path() + "/l2/s"; }
  std::string path() const { return store_dir() + "/" + container_name(3); }

  TempDir dir;
  std::vector<double> u = std::vector<double>(8 * 16);
  std::vector<std::int32_t> v = std::vector<std::int32_t>(100);
};

TEST_F(ToolsTest, InspectReadsTheHeaderAndTheIndex) {
  const tools::ContainerInfo info = tools::inspect(path());
  EXPECT_EQ(info.store, "s");
  EXPECT_EQ(info.version, 3);
  EXPECT_EQ(info.rank, 0u);
  EXPECT_EQ(info.base_version, -1);
  EXPECT_EQ(info.metadata, bytes_of("t=1", 3));
  ASSERT_EQ(info.regions.size(), 2u);
  EXPECT_EQ(info.regions[0].label, "u");
  EXPECT_EQ(info.regions[0].bytes, 1024u);
  EXPECT_EQ(info.regions[0].type.dtype, "float64");
  EXPECT_EQ(info.regions[0].type.shape, (std::vector<std::int64_t>{8, 16}));
  EXPECT_EQ(info.regions[0].kind, MemoryKind::kHost);
  EXPECT_EQ(info.regions[1].id, 1);
  EXPECT_EQ(info.regions[1].type.dtype, "int32");
  std::uint64_t raw = 0;
  for (const tools::ChunkInfo& chunk : info.chunks) {
    raw += chunk.raw_length;
    EXPECT_EQ(chunk.codec, "none");
  }
  EXPECT_EQ(raw, 1024u + 400u);
  EXPECT_EQ(info.file_size, fs::file_size(path()));
  EXPECT_NE(info.checksum, 0u);
}

TEST_F(ToolsTest, VerifyReadsEveryChunkAndReportsItsProgress) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  const tools::VerifyReport report =
      tools::verify(path(), [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(report.bytes, 1424u);
  EXPECT_EQ(report.chunks, tools::inspect(path()).chunks.size());
  ASSERT_EQ(calls.size(), 1u);  // far below kVerifyProgressStep: only the end
  EXPECT_EQ(calls.back(), std::make_pair(std::uint64_t{1424}, std::uint64_t{1424}));
  EXPECT_EQ(tools::verify(path()).bytes, 1424u);  // no progress callback
}

TEST_F(ToolsTest, ReadRegionGivesTheBytesThatWereProtected) {
  EXPECT_EQ(read_whole_region(path(), 0), bytes_of(u.data(), u.size() * sizeof(double)));
  EXPECT_EQ(read_whole_region(path(), 1), bytes_of(v.data(), v.size() * sizeof(std::int32_t)));
  EXPECT_THROW(read_whole_region(path(), 7), NotFoundError);
}

TEST_F(ToolsTest, ADamagedChunkIsRefusedNamingTheFile) {
  const tools::ChunkInfo chunk = tools::inspect(path()).chunks.at(0);
  flip_bit(path(), chunk.file_offset + chunk.stored_length / 2);
  EXPECT_NO_THROW(tools::inspect(path()));  // the header and the index are intact
  expect_corruption_naming(path(), [&] { tools::verify(path()); });
  expect_corruption_naming(path(), [&] { read_whole_region(path(), static_cast<int>(chunk.region)); });
}

TEST_F(ToolsTest, ADamagedHeaderIsRefusedNamingTheFile) {
  flip_bit(path(), 50);  // in the creation time, which only the header+index checksum can tell
  expect_corruption_naming(path(), [&] { tools::inspect(path()); });
  expect_corruption_naming(path(), [&] { tools::verify(path()); });
}

TEST_F(ToolsTest, VerifyRefusesAFileOfAnotherVersionRenamedInPlace) {
  const std::string renamed = store_dir() + "/" + container_name(4);
  fs::copy_file(path(), renamed);
  expect_corruption_naming(renamed, [&] { tools::verify(renamed); });
  const std::string moved = dir.path() + "/copy.rsg";  // a name that is no version's: intact
  fs::copy_file(path(), moved);
  EXPECT_EQ(tools::verify(moved).bytes, 1424u);
}

TEST_F(ToolsTest, ReadManifestOfAVersionWithoutOneIsNotFound) {
  try {
    tools::read_manifest(store_dir(), 3);  // a store of one process writes no job manifest
    ADD_FAILURE() << "no NotFoundError";
  } catch (const NotFoundError& error) {
    EXPECT_NE(std::string(error.what()).find(store_dir() + "/v0000000003.job"), std::string::npos) << error.what();
  }
}

TEST(ToolsNames, ContainerFileNamesParseBackOnlyAsWritten) {
  EXPECT_EQ(tools::parse_container_file_name("v0000000012.r000003.rsg"), std::make_pair(12, 3));
  EXPECT_EQ(tools::parse_container_file_name("v0000000012.r000003.rsg.damaged"), std::nullopt);
  EXPECT_EQ(tools::parse_container_file_name("v12.r3.rsg"), std::nullopt);
  EXPECT_EQ(tools::parse_container_file_name("v0000000012.job"), std::nullopt);
}

TEST(ToolsNames, MemoryKindsByName) {
  for (MemoryKind kind : {MemoryKind::kHost, MemoryKind::kDevice, MemoryKind::kManaged}) {
    EXPECT_EQ(tools::memory_kind_named(tools::memory_kind_name(kind)), kind);
  }
  EXPECT_STREQ(tools::memory_kind_name(MemoryKind::kManaged), "managed");
  EXPECT_THROW(tools::memory_kind_named("gpu"), InvalidArgumentError);
}

TEST(ToolsWriteContainer, AFullVersionAndADeltaReadBack) {
  TempDir dir;
  tools::ContainerHeader header;
  header.store = "chain";
  header.chunk_size = 1024;
  header.regions = {{0, "u", 4096, {"uint8", {4096}}, MemoryKind::kHost}};
  const std::vector<std::byte> full(4096, std::byte{7});
  std::vector<tools::ChunkBytes> chunks;
  for (std::uint64_t offset = 0; offset < full.size(); offset += 1024) {
    chunks.push_back({0, offset, std::span(full).subspan(offset, 1024)});
  }
  const std::string base = dir.path() + "/" + container_name(0);
  tools::write_container(base, header, chunks);
  EXPECT_EQ(tools::verify(base).bytes, 4096u);
  EXPECT_EQ(read_whole_region(base, 0), full);

  header.version = 1;
  header.base_version = 0;
  const std::vector<std::byte> extent(100, std::byte{1});
  const std::string delta = dir.path() + "/" + container_name(1);
  tools::write_container(delta, header, {{0, 50, extent}});
  const tools::ContainerInfo info = tools::inspect(delta);
  EXPECT_EQ(info.base_version, 0);
  ASSERT_EQ(info.chunks.size(), 1u);
  EXPECT_EQ(info.chunks[0].offset, 50u);
  EXPECT_EQ(tools::verify(delta).bytes, 100u);
  EXPECT_THROW(read_whole_region(delta, 0), InvalidArgumentError);  // a delta holds only its extents
}

}  // namespace
}  // namespace resurgo
