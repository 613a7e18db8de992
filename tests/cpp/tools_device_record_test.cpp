// What inspect() shows of the device record of container format 3
// (docs/format.md, "Header"): each managed region's device, the host or
// unknown, from files the store's own writer (format::ContainerWriter)
// made; nothing for the other kinds nor for a format 2 file; the format
// version of each file, of a shared file's parts too; and write_container
// writing the record it is given.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/container.h"
#include "format/file_names.h"
#include "format/shared_file.h"
#include "io/bytes_file.h"
#include "one_chunk_per_region.h"
#include "resurgo/tools.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

using format::RegionEntry;
using format::RegionKind;

constexpr std::uint64_t kPlacedRegionBytes = 32;

// Rank `rank`'s version `version` of store "placed" holding `regions`, one
// chunk each, as the store's writer writes it.
std::vector<std::byte> placed_container(const std::vector<RegionEntry>& regions, int version = 5, int rank = 0) {
  format::Header header;
  header.store = "placed";
  header.version = version;
  header.rank = static_cast<std::uint32_t>(rank);
  header.chunk_size = 4096;
  header.regions = regions;
  return one_chunk_per_region(header, kPlacedRegionBytes, std::byte{3});
}

RegionEntry placed_region(int id, RegionKind kind, std::int32_t device = format::kDeviceUnknown) {
  return {id, "r" + std::to_string(id), kind, kPlacedRegionBytes, "uint8", {}, device};
}

std::string saved_as(const TempDir& dir, const std::string& name, const std::vector<std::byte>& bytes) {
  const std::string path = dir.path() + "/" + name;
  write_file(path, bytes);
  return path;
}

std::vector<std::optional<int>> devices_of(const tools::ContainerInfo& info) {
  std::vector<std::optional<int>> devices;
  for (const tools::ContainerRegion& region : info.regions) devices.push_back(region.device);
  return devices;
}

TEST(ToolsDeviceRecordTest, InspectShowsEachManagedRegionsDeviceInFormat3) {
  const TempDir dir;
  const std::string path = saved_as(dir, "v3.rsg",
                                    placed_container({placed_region(0, RegionKind::kManaged, 1),
                                                      placed_region(1, RegionKind::kManaged, format::kDeviceHost),
                                                      placed_region(2, RegionKind::kManaged),
                                                      placed_region(3, RegionKind::kHost),
                                                      placed_region(4, RegionKind::kDevice),
                                                      placed_region(5, RegionKind::kManaged, 0)}));
  const tools::ContainerInfo info = tools::inspect(path);
  EXPECT_EQ(info.format_version, 3u);
  EXPECT_EQ(devices_of(info), (std::vector<std::optional<int>>{1, tools::kRecordedHost, tools::kRecordedUnknown,
                                                                std::nullopt, std::nullopt, 0}));
  EXPECT_EQ(info.regions[2].kind, MemoryKind::kManaged);
  EXPECT_EQ(info.regions[5].label, "r5");
}

// A managed region of a file that records no device (format 2) shows none,
// not "unknown": the file says nothing of where it was.
TEST(ToolsDeviceRecordTest, AFormat2FileShowsNoDevice) {
  const TempDir dir;
  const std::string path = saved_as(
      dir, "v2.rsg", placed_container({placed_region(0, RegionKind::kManaged), placed_region(1, RegionKind::kHost)}));
  const tools::ContainerInfo info = tools::inspect(path);
  EXPECT_EQ(info.format_version, 2u);
  EXPECT_EQ(devices_of(info), (std::vector<std::optional<int>>{std::nullopt, std::nullopt}));
}

// write_container (the Python tests' writer) writes the record as the
// store does: format 3 with a device, the field where the reader looks.
TEST(ToolsDeviceRecordTest, WriteContainerWritesTheDeviceItIsGiven) {
  const TempDir dir;
  tools::ContainerHeader header;
  header.store = "placed";
  header.version = 2;
  header.chunk_size = 4096;
  header.regions = {{{0, "m", kPlacedRegionBytes, {"uint8", {}}, MemoryKind::kManaged}, 3},
                    {{1, "h", kPlacedRegionBytes, {"uint8", {}}, MemoryKind::kHost}, std::nullopt}};
  const std::vector<std::byte> data(kPlacedRegionBytes, std::byte{9});
  const std::vector<tools::ChunkBytes> chunks = {{0, 0, data}, {1, 0, data}};
  const std::string path = dir.path() + "/v2.rsg";
  tools::write_container(path, header, chunks);
  const tools::ContainerInfo info = tools::inspect(path);
  EXPECT_EQ(info.format_version, 3u);
  EXPECT_EQ(devices_of(info), (std::vector<std::optional<int>>{3, std::nullopt}));
  const BytesFile file(read_file(path), path);
  EXPECT_EQ(format::read_container(file).header.regions[0].device, 3);

  header.regions[0].device.reset();
  const std::string unrecorded = dir.path() + "/unrecorded.rsg";
  tools::write_container(unrecorded, header, chunks);
  EXPECT_EQ(tools::inspect(unrecorded).format_version, 2u);
  EXPECT_EQ(devices_of(tools::inspect(unrecorded)), (std::vector<std::optional<int>>{std::nullopt, std::nullopt}));
}

// Each part of a shared file is shown as the container it was: rank 0's
// records a device (format 3), rank 1's none (format 2).
TEST(ToolsDeviceRecordTest, InspectSharedShowsEachPartsFormatAndDevices) {
  constexpr int kVersion = 6;
  const std::vector<std::vector<std::byte>> parts = {
      placed_container({placed_region(0, RegionKind::kManaged, 2)}, kVersion, 0),
      placed_container({placed_region(0, RegionKind::kManaged)}, kVersion, 1)};
  format::SharedIndex index{kVersion, {}};
  std::vector<std::byte> bytes;
  for (const std::vector<std::byte>& part : parts) {
    const std::uint64_t checksum = format::read_container(BytesFile(part, "part")).checksum;
    index.parts.push_back({bytes.size(), part.size(), checksum});
    bytes.insert(bytes.end(), part.begin(), part.end());
  }
  const std::vector<std::byte> tail = format::encode_shared_index(index, bytes.size());
  bytes.insert(bytes.end(), tail.begin(), tail.end());
  const TempDir dir;
  const tools::SharedFileInfo info = tools::inspect_shared(saved_as(dir, format::shared_file_name(kVersion), bytes));
  ASSERT_EQ(info.parts.size(), 2u);
  EXPECT_EQ(info.parts[0].container.format_version, 3u);
  EXPECT_EQ(devices_of(info.parts[0].container), (std::vector<std::optional<int>>{2}));
  EXPECT_EQ(info.parts[1].container.format_version, 2u);
  EXPECT_EQ(devices_of(info.parts[1].container), (std::vector<std::optional<int>>{std::nullopt}));
}

}  // namespace
}  // namespace resurgo
