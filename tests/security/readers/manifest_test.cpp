// Hostile job manifests behind a valid checksum line: offsets and shapes
// that overflow, numbers out of their field's range, files outside the
// manifest's directory, JSON nested without end. Each is refused naming the
// manifest.
#include <gtest/gtest.h>

#include "format/manifest.h"
#include "hostile_files.h"
#include "refusal.h"
#include "resurgo/errors.hpp"
#include "resurgo/tools.hpp"
#include "test_util.h"

namespace resurgo::security {
namespace {

constexpr char kFile[] = "v0000000001.r000000.rsg";
// A block of 2 float64 of a global array of 4, without its offset.
constexpr char kBlock[] = R"("label":"g","dtype":"float64","bytes":16,"shape":[2],"global_shape":[4],)";

class HostileManifest : public ::testing::Test {
 protected:
  void write(const std::string& json) { write_file(path_, as_bytes(manifest_with(json))); }
  std::string refused(const std::string& json) {
    write(json);
    return refusal<FormatError>([&] { tools::read_manifest(dir_.path(), 1); });
  }

  TempDir dir_;
  std::string path_ = dir_.path() + "/v0000000001.job";
};

TEST_F(HostileManifest, AWellFormedOneIsRead) {
  write(one_rank_json(kFile, std::string(kBlock) + R"("offset":[2])"));
  const Manifest manifest = tools::read_manifest(dir_.path(), 1);
  ASSERT_EQ(manifest.files.size(), 1u);
  EXPECT_EQ(manifest.files[0].file, kFile);
  ASSERT_EQ(manifest.regions.size(), 1u);
  EXPECT_EQ(manifest.regions[0].offset, std::vector<std::int64_t>{2});
}

// offset + shape overflowed a signed 64-bit integer in the bounds check.
TEST_F(HostileManifest, OffsetsThatOverflowAreRefused) {
  for (const char* offset : {"9223372036854775807", "9223372036854775806", "-9223372036854775808"}) {
    SCOPED_TRACE(offset);
    expect_mentions(refused(one_rank_json(kFile, std::string(kBlock) + R"("offset":[)" + offset + "]")),
                    {path_, "region 'g' of rank 0", "outside its global array on axis 0"});
  }
}

TEST_F(HostileManifest, GlobalArraysOfMoreThan2To63ElementsAreRefused) {
  const std::string region = R"("label":"g","dtype":"uint8","bytes":1,"shape":[1,1,1],)"
                             R"("global_shape":[4294967296,4294967296,4],"offset":[0,0,0])";
  expect_mentions(refused(one_rank_json(kFile, region)), {path_, "region 'g'", "more than 2^63 elements"});
}

TEST_F(HostileManifest, NumbersOutOfTheirFieldsRangeAreRefused) {
  const std::string block = std::string(kBlock) + R"("offset":[2])";
  const std::string json = one_rank_json(kFile, block);
  const struct {
    const char* from;
    const char* to;
  } edits[] = {{R"("version":1)", R"("version":4294967297)"},
               {R"("ranks":1)", R"("ranks":1e300)"},
               {R"("bytes":16)", R"("bytes":-16)"},
               {R"("offset":[2])", R"("offset":[18446744073709551615])"},
               {R"("offset":[2])", R"("offset":[2.5])"}};
  for (const auto& edit : edits) {
    SCOPED_TRACE(edit.to);
    std::string hostile = json;
    hostile.replace(hostile.find(edit.from), std::string(edit.from).size(), edit.to);
    expect_mentions(refused(hostile), {path_, "not an integer in the range of its field"});
  }
}

// `resurgo export` joined the file name to the manifest's directory.
TEST_F(HostileManifest, FilesOutsideTheVersionAndDirectoryAreRefused) {
  const std::string block = std::string(kBlock) + R"("offset":[2])";
  for (const char* file : {"../../etc/passwd", "/etc/passwd", "..", "v0000000001.r000000.rsg/..",
                           "../v0000000001.r000000.rsg", "v0000000002.r000000.rsg", "v0000000001.r000001.rsg",
                           "v+000000001.r000000.rsg", ""}) {
    SCOPED_TRACE(file);
    expect_mentions(refused(one_rank_json(file, block)),
                    {path_, std::string("rank 0's file is '") + file + "'", "not v0000000001.r000000.rsg"});
  }
}

TEST_F(HostileManifest, DeepJsonIsRefusedAtTheDepthLimit) {
  write_file(path_, as_bytes(deep_json_manifest(100'000)));
  expect_mentions(refusal<FormatError>([&] { tools::read_manifest(dir_.path(), 1); }),
                  {path_, "nests deeper than 32 levels"});
  // 32 levels parse (and are no manifest); 33 do not.
  write_file(path_, as_bytes(deep_json_manifest(format::kMaxJsonDepth)));
  const std::string shallow = refusal<FormatError>([&] { tools::read_manifest(dir_.path(), 1); });
  EXPECT_EQ(shallow.find("nests deeper"), std::string::npos) << shallow;
  write_file(path_, as_bytes(deep_json_manifest(format::kMaxJsonDepth + 1)));
  expect_mentions(refusal<FormatError>([&] { tools::read_manifest(dir_.path(), 1); }), {"nests deeper"});
}

}  // namespace
}  // namespace resurgo::security
