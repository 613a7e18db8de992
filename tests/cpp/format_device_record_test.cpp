// The device record of the region table (container format version 3,
// docs/format.md "Header"): written only for a version that records a
// managed region's device, read back as written, and a damaged record is
// refused or harmless (an ordinal the reader cannot bound here is bounded
// by the driver's device count at restart: managed_recorded_device_test).
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "format/container.h"
#include "io/bytes_file.h"
#include "one_chunk_per_region.h"
#include "resurgo/errors.hpp"

namespace resurgo {
namespace {

using format::RegionEntry;
using format::RegionKind;

constexpr char kStore[] = "devices";
constexpr char kManagedLabel[] = "m";
constexpr std::uint64_t kBytes = 64;

// A full version of a managed region (first) recording `device` and a host
// region, one chunk each.
std::vector<std::byte> container(std::int32_t device) {
  format::Header header;
  header.store = kStore;
  header.version = 3;
  header.chunk_size = 4096;
  header.regions.push_back({0, kManagedLabel, RegionKind::kManaged, kBytes, "uint8", {}, device});
  header.regions.push_back({1, "h", RegionKind::kHost, kBytes, "", {}});
  return one_chunk_per_region(header, kBytes, std::byte{7});
}

std::uint32_t format_version(const std::vector<std::byte>& bytes) {
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  return version;
}

format::Container read(std::vector<std::byte> bytes) {
  const BytesFile file(std::move(bytes), "device-record.rsg");
  return format::read_container(file);
}

// Where the first region entry's device lies in a version 3 header: the
// prefix, the store name, store identity, version, rank, base, creation
// time, chunk size and region count, then the entry's id, label and kind.
constexpr std::size_t kFirstEntry = 24 + 4 + sizeof kStore - 1 + 16 + 8 + 4 + 8 + 8 + 8 + 4;
constexpr std::size_t kFirstDevice = kFirstEntry + 4 + 4 + sizeof kManagedLabel - 1 + 1;
// The second entry (the host region's) follows: id, label "h", kind.
constexpr std::size_t kSecondDevice = kFirstDevice + 4 + 8 + 4 + 5 + 4 + 4 + 4 + 1 + 1;

// `bytes` with the int32 at `offset` set to `value` and the footer's
// header+index checksum recomputed, as a writer would have sealed it.
std::vector<std::byte> with_field(std::vector<std::byte> bytes, std::size_t offset, std::int32_t value) {
  std::memcpy(bytes.data() + offset, &value, sizeof value);
  const std::size_t footer = bytes.size() - format::kFooterBytes;
  std::uint64_t header_length = 0;
  std::uint64_t index_offset = 0;
  std::memcpy(&header_length, bytes.data() + footer, 8);
  std::memcpy(&index_offset, bytes.data() + footer + 8, 8);
  std::vector<std::byte> covered(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header_length));
  covered.insert(covered.end(), bytes.begin() + static_cast<std::ptrdiff_t>(index_offset),
                 bytes.begin() + static_cast<std::ptrdiff_t>(footer));
  const std::uint64_t sum = format::checksum(covered.data(), covered.size());
  std::memcpy(bytes.data() + footer + 24, &sum, sizeof sum);
  return bytes;
}

TEST(FormatDeviceRecordTest, AManagedRegionsDeviceIsWrittenAsVersion3AndReadBack) {
  for (const std::int32_t device : {0, 1, 5, format::kDeviceHost}) {
    const std::vector<std::byte> bytes = container(device);
    EXPECT_EQ(format_version(bytes), format::kDeviceFormatVersion) << device;
    const format::Container read_back = read(bytes);
    EXPECT_EQ(read_back.header.regions[0].device, device);
    EXPECT_EQ(read_back.header.regions[1].device, format::kDeviceUnknown);
    std::int32_t field = 0;
    std::memcpy(&field, bytes.data() + kFirstDevice, sizeof field);
    EXPECT_EQ(field, device) << "the device lies after the kind (docs/format.md)";
  }
}

// Nothing recorded: the version 2 layout, which earlier releases read.
TEST(FormatDeviceRecordTest, AVersionThatRecordsNoDeviceIsWrittenAsVersion2) {
  const std::vector<std::byte> bytes = container(format::kDeviceUnknown);
  EXPECT_EQ(format_version(bytes), format::kFormatVersion);
  EXPECT_EQ(format::kFormatVersion, 2u);
  const format::Container read_back = read(bytes);
  EXPECT_EQ(read_back.header.regions[0].device, format::kDeviceUnknown);
  EXPECT_EQ(bytes.size() + 2 * sizeof(std::int32_t), container(0).size()) << "4 bytes per entry in version 3";
}

// Below -2 is no device at all; a device on a region that is not managed
// memory was never written: both refused, naming the region.
TEST(FormatDeviceRecordTest, AnImpossibleDeviceIsRefusedNamingTheRegion) {
  const std::vector<std::byte> good = container(1);
  for (const std::int32_t device : {-3, -100, INT_MIN}) {
    try {
      read(with_field(good, kFirstDevice, device));
      ADD_FAILURE() << "device " << device << " accepted";
    } catch (const CorruptionError& error) {
      EXPECT_NE(std::string(error.what()).find("region 'm' records device " + std::to_string(device)),
                std::string::npos)
          << error.what();
    }
  }
  for (const std::int32_t device : {0, format::kDeviceHost}) {
    try {
      read(with_field(good, kSecondDevice, device));
      ADD_FAILURE() << "device " << device << " of a host region accepted";
    } catch (const CorruptionError& error) {
      EXPECT_NE(std::string(error.what()).find("region 'h' is not managed memory but records device"),
                std::string::npos)
          << error.what();
    }
  }
}

// Any ordinal is a well-formed record: restart bounds it by the devices
// there are. Unsealed, any change of the field fails the checksum.
TEST(FormatDeviceRecordTest, AnyOrdinalIsReadAndAnUnsealedChangeFailsTheChecksum) {
  const std::vector<std::byte> good = container(1);
  for (const std::int32_t device : {0, 2, 7, 4096, INT_MAX, format::kDeviceUnknown}) {
    EXPECT_EQ(read(with_field(good, kFirstDevice, device)).header.regions[0].device, device);
  }
  for (std::size_t byte = kFirstDevice; byte < kFirstDevice + 4; ++byte) {
    std::vector<std::byte> damaged = good;
    damaged[byte] ^= std::byte{0x40};
    EXPECT_THROW(read(damaged), CorruptionError) << "byte " << byte;
  }
}

// A version 3 header is bounded as a version 2 one: a region count beyond
// what the header can hold at 29 bytes an entry is refused before the table
// is allocated.
TEST(FormatDeviceRecordTest, AVersion3RegionCountIsBoundedByTheHeader) {
  const std::size_t count_offset = kFirstEntry - 4;
  std::vector<std::byte> bytes = container(1);
  const std::vector<std::byte> damaged = with_field(bytes, count_offset, 1000);
  try {
    read(damaged);
    ADD_FAILURE() << "a region count of 1000 accepted";
  } catch (const CorruptionError& error) {
    EXPECT_NE(std::string(error.what()).find("region count 1000 exceeds the header size"), std::string::npos)
        << error.what();
  }
}

// The device is not part of the table a delta shares with its base: the
// pages move between versions.
TEST(FormatDeviceRecordTest, TheRegionTableOfADeltaIgnoresDevices) {
  format::Header base = read(container(0)).header;
  format::Header delta = read(container(format::kDeviceHost)).header;
  EXPECT_EQ(format::region_table_difference(delta, base), "");
}

}  // namespace
}  // namespace resurgo
