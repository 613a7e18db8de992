// Every reader on every hostile file, each in a child whose address space
// is capped at what it already maps plus the file's size, one chunk (4 MiB)
// and a small slack (bounded_child.h): each must end with a clean refusal
// (a resurgo::Error), never std::bad_alloc, another exception or a crash.
// The FormatHostile tests of tests/cpp/format_test.cpp measure the largest
// single allocation of read_container; this measures the whole of every
// reader, the decoders included.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "bounded_child.h"
#include "format/container.h"
#include "hostile_files.h"
#include "resurgo/config.hpp"
#include "resurgo/env.hpp"
#include "resurgo/tools.hpp"
#include "test_util.h"

namespace resurgo::security {
namespace {

constexpr std::uint64_t kGiB = 1u << 30;

struct HostileFile {
  const char* name;
  std::function<std::vector<std::byte>()> make;
};

const HostileFile kHostileFiles[] = {
    {"zstd_bomb_288_bytes",
     [] { return one_chunk_container(Codec::kZstd, kGiB, compressed_zeros(Codec::kZstd, 4096), true); }},
    {"lz4_claims_1GiB", [] { return one_chunk_container(Codec::kLz4, kGiB, compressed_zeros(Codec::kLz4, 65536), false); }},
    {"blosc_lz4_claims_1GiB",
     [] { return one_chunk_container(Codec::kBloscLz4, kGiB, compressed_zeros(Codec::kBloscLz4, 65536), false); }},
    {"blosc_zstd_claims_1GiB",
     [] { return one_chunk_container(Codec::kBloscZstd, kGiB, compressed_zeros(Codec::kBloscZstd, 65536), false); }},
    {"region_count_2to32", [] { return container_with_region_table(minimal_region_table(0xffffffff, 2)); }},
    {"header_65MB_of_regions",
     [] { return container_with_region_table(minimal_region_table(2'600'000, 2'600'000)); }},
    {"manifest_offset_overflow",
     [] {
       return as_bytes(manifest_with(one_rank_json(
           "v0000000001.r000000.rsg",
           R"("label":"g","dtype":"float64","bytes":16,"shape":[2],"global_shape":[4],"offset":[9223372036854775807])")));
     }},
    {"manifest_file_etc_passwd",
     [] { return as_bytes(manifest_with(one_rank_json("../../etc/passwd", R"("label":"g","dtype":"","bytes":1,)"
                                                                           R"("shape":[],"global_shape":[],"offset":[])"))); }},
    {"manifest_json_100000_deep", [] { return as_bytes(deep_json_manifest(100'000)); }},
    {"toml_header_50000_deep", [] { return as_bytes(deep_toml_header(50'000)); }},
};

struct Reader {
  const char* name;
  // Reads the file `path`; `dir` holds it as the job manifest of version 1 too.
  std::function<void(const std::string& path, const std::string& dir)> read;
};

// The chunks one by one as a reader that sizes its own buffer does: the
// stored bytes checked first, the raw buffer sized after.
void read_every_chunk(const std::string& path) {
  const auto file = Env::posix()->open(path);
  const format::Container container = format::read_container(*file);
  std::vector<std::byte> scratch;
  for (const format::ChunkRecord& chunk : container.chunks) {
    const std::byte* stored = format::read_stored(*file, container, chunk, scratch);
    std::vector<std::byte> raw(chunk.raw_length);
    format::decode_stored(*file, container, chunk, stored, raw.data());
  }
}

void read_every_region(const std::string& path) {
  std::vector<std::byte> region;
  for (const RegionDescription& description : tools::inspect(path).regions) {
    tools::read_region(path, description.id, [&](std::uint64_t bytes) {
      region.resize(bytes);
      return region.data();
    });
  }
}

const Reader kReaders[] = {
    {"format::read_container", [](const std::string& path, const std::string&) {
       format::read_container(*Env::posix()->open(path));
     }},
    {"tools::inspect", [](const std::string& path, const std::string&) { tools::inspect(path); }},
    {"tools::verify (verify_chunks)", [](const std::string& path, const std::string&) { tools::verify(path); }},
    {"read_stored + decode_stored", [](const std::string& path, const std::string&) { read_every_chunk(path); }},
    {"tools::read_region", [](const std::string& path, const std::string&) { read_every_region(path); }},
    {"tools::read_manifest", [](const std::string&, const std::string& dir) { tools::read_manifest(dir, 1); }},
    {"Config::load", [](const std::string& path, const std::string&) { Config::load(path); }},
};

class EveryReader : public ::testing::TestWithParam<HostileFile> {};

TEST_P(EveryReader, RefusesWithinAFilesSizeAndOneChunk) {
  TempDir dir;
  const std::string path = dir.path() + "/v0000000001.r000000.rsg";  // the version and rank the containers hold
  std::uint64_t size = 0;
  {
    const std::vector<std::byte> bytes = GetParam().make();
    size = bytes.size();
    write_file(path, bytes);
  }
  std::filesystem::create_hard_link(path, dir.path() + "/v0000000001.job");
  for (const Reader& reader : kReaders) {
    SCOPED_TRACE(reader.name);
    const ChildOutcome outcome = run_bounded(reader_budget(size), [&] { reader.read(path, dir.path()); });
    EXPECT_EQ(outcome.kind, ChildOutcome::Kind::kRefused) << describe(outcome);
  }
}

INSTANTIATE_TEST_SUITE_P(HostileFiles, EveryReader, ::testing::ValuesIn(kHostileFiles),
                         [](const auto& test) { return std::string(test.param.name); });

// The cap is what makes the test above mean something: a reader that sizes
// a buffer by a claimed length, as verify did, fails under it, and so does
// one that crashes, as toml++ did.
TEST(BoundedChild, SeesAnAllocationBeyondTheBudgetAndACrash) {
  ChildOutcome outcome = run_bounded(reader_budget(300), [] {
    std::vector<std::byte> buffer(64u << 20);
    asm volatile("" : : "r"(buffer.data()) : "memory");  // the allocation is not optimised away
  });
  EXPECT_EQ(outcome.kind, ChildOutcome::Kind::kBadAlloc) << describe(outcome);
  outcome = run_bounded(reader_budget(300), [] { std::abort(); });
  EXPECT_EQ(outcome.kind, ChildOutcome::Kind::kCrashed) << describe(outcome);
  outcome = run_bounded(reader_budget(300), [] { std::vector<std::byte> buffer(1u << 20); });
  EXPECT_EQ(outcome.kind, ChildOutcome::Kind::kAccepted) << describe(outcome);
}

}  // namespace
}  // namespace resurgo::security
