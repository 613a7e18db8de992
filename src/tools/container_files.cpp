// inspect(), verify() and read_region(): the container reader
// (format/container.h) for files read without a store.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "format/codec.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/shared_file.h"
#include "resurgo/errors.hpp"
#include "resurgo/tools.hpp"

namespace resurgo::tools {

namespace {

// A container's format::RegionKind holds the values of the public
// MemoryKind: the store writes one as the other.
static_assert(static_cast<int>(MemoryKind::kHost) == static_cast<int>(format::RegionKind::kHost));
static_assert(static_cast<int>(MemoryKind::kDevice) == static_cast<int>(format::RegionKind::kDevice));
static_assert(static_cast<int>(MemoryKind::kManaged) == static_cast<int>(format::RegionKind::kManaged));

struct OpenContainer {
  std::unique_ptr<ReadableFile> file;
  format::Container container;
};

OpenContainer open_container(const std::string& path) {
  OpenContainer open{Env::posix()->open(path), {}};
  open.container = format::read_container(*open.file);
  return open;
}

// The recorded residences keep the file's values.
static_assert(kRecordedHost == format::kDeviceHost && kRecordedUnknown == format::kDeviceUnknown);

// A format 1 or 2 file records no device, and format 3 records one for
// managed regions alone (kDeviceUnknown for the others).
ContainerRegion region_of(const format::RegionEntry& region, std::uint32_t format_version) {
  const auto kind = static_cast<MemoryKind>(region.kind);
  const bool recorded = format_version >= format::kDeviceFormatVersion && kind == MemoryKind::kManaged;
  return {{region.id, region.label, region.bytes, {region.dtype, region.shape}, kind},
          recorded ? std::optional<int>(region.device) : std::nullopt};
}

ContainerInfo info_of(const format::Container& container) {
  const format::Header& header = container.header;
  ContainerInfo info;
  info.format_version = container.format_version;
  info.store = header.store;
  info.version = header.version;
  info.rank = header.rank;
  info.base_version = header.base_version;
  info.created_unix_ns = header.created_unix_ns;
  info.chunk_size = header.chunk_size;
  info.metadata = header.metadata;
  for (const format::RegionEntry& region : header.regions) {
    info.regions.push_back(region_of(region, info.format_version));
  }
  for (const format::ChunkRecord& chunk : container.chunks) {
    info.chunks.push_back({chunk.region, chunk.offset, chunk.raw_length, chunk.stored_length,
                           to_string(chunk.codec), chunk.checksum, chunk.file_offset});
  }
  info.file_size = container.file_size;
  info.index_offset = container.index_offset;
  info.checksum = container.checksum;
  return info;
}

// A shared file (format/shared_file.h) whose part index was read and
// checked against the version the file's name says.
struct OpenShared {
  std::shared_ptr<const ReadableFile> file;
  format::SharedIndex index;
};

OpenShared open_shared(const std::string& path, int version) {
  OpenShared open{Env::posix()->open(path), {}};
  open.index = format::read_shared_index(*open.file);
  if (open.index.version != version) {
    throw CorruptionError("shared file '" + path + "' holds version " + std::to_string(open.index.version) +
                          ", not " + std::to_string(version) + " as its name says");
  }
  return open;
}

// Rank `rank`'s part, read as a container file and checked as inspect()
// checks one, against the part's rank and the checksum in the part index.
OpenContainer open_checked_part(const OpenShared& shared, std::size_t rank) {
  const int version = static_cast<int>(shared.index.version);
  OpenContainer part{format::open_part(shared.file, shared.index.parts[rank], static_cast<int>(rank)), {}};
  part.container = format::read_container(*part.file);
  format::check_identity(part.container, part.file->path(), "", version, static_cast<int>(rank));
  if (part.container.checksum != shared.index.parts[rank].checksum) {
    throw CorruptionError("'" + part.file->path() + "' is not the part the index of version " +
                          std::to_string(version) + " names (its checksum differs)");
  }
  return part;
}

// Every rank's part of a shared file, each verified as a container file.
VerifyReport verify_shared(const std::string& path, int version, const VerifyProgress& progress) {
  const OpenShared shared = open_shared(path, version);
  VerifyReport report{0, 0};
  for (std::size_t rank = 0; rank < shared.index.parts.size(); ++rank) {
    const OpenContainer part = open_checked_part(shared, rank);
    const std::uint64_t before = report.bytes;
    format::verify_chunks(*part.file, part.container, [&](std::uint64_t done, std::uint64_t total) {
      report.bytes = before + total;
      if (progress && done == total) progress(before + done, before + total);
    });
    report.chunks += part.container.chunks.size();
  }
  return report;
}

}  // namespace

ContainerInfo inspect(const std::string& path) { return info_of(open_container(path).container); }

SharedFileInfo inspect_shared(const std::string& path) {
  const std::optional<int> version = parse_shared_file_name(std::filesystem::path(path).filename().string());
  if (!version) {
    throw InvalidArgumentError("'" + path + "' is not named as a shared file (v<version>.shared.rsg): `resurgo "
                               "inspect` reads it as a rank's container file");
  }
  const OpenShared shared = open_shared(path, *version);
  SharedFileInfo info{*version, shared.file->size(), {}};
  for (std::size_t rank = 0; rank < shared.index.parts.size(); ++rank) {
    const format::SharedPart& part = shared.index.parts[rank];
    const ContainerInfo container = info_of(open_checked_part(shared, rank).container);
    info.parts.push_back({static_cast<int>(rank), part.offset, part.bytes, container});
  }
  return info;
}

VerifyReport verify(const std::string& path, const VerifyProgress& progress) {
  if (const auto shared = parse_shared_file_name(std::filesystem::path(path).filename().string())) {
    return verify_shared(path, *shared, progress);
  }
  const OpenContainer open = open_container(path);
  // A file of another version renamed in place is damage.
  if (const auto named = parse_container_file_name(std::filesystem::path(path).filename().string())) {
    format::check_identity(open.container, path, "", named->first, named->second);
  }
  VerifyReport report{open.container.chunks.size(), 0};
  std::uint64_t reported = 0;
  format::verify_chunks(*open.file, open.container, [&](std::uint64_t done, std::uint64_t total) {
    report.bytes = total;
    if (progress && (done - reported >= kVerifyProgressStep || done == total)) {
      reported = done;
      progress(done, total);
    }
  });
  return report;
}

void read_region(const std::string& path, int region_id, const RegionDestination& destination) {
  const OpenContainer open = open_container(path);
  const format::Header& header = open.container.header;
  if (format::is_delta(header)) {
    throw InvalidArgumentError("'" + path + "' holds a delta version (only the blocks written since version " +
                               std::to_string(header.base_version) + "): export a full version");
  }
  std::uint32_t index = 0;
  while (index < header.regions.size() && header.regions[index].id != region_id) ++index;
  if (index == header.regions.size()) {
    throw NotFoundError("'" + path + "' has no region with id " + std::to_string(region_id) +
                        " (`resurgo inspect " + path + "` lists its regions)");
  }
  auto* bytes = static_cast<std::byte*>(destination(header.regions[index].bytes));
  std::vector<std::byte> scratch;
  for (const format::ChunkRecord& chunk : open.container.chunks) {
    if (chunk.region == index) format::read_chunk(*open.file, open.container, chunk, bytes + chunk.offset, scratch);
  }
}

std::optional<int> parse_shared_file_name(const std::string& name) {
  int version = 0;
  if (!format::parse_shared_file_name(name, version)) return std::nullopt;
  return version;
}

std::optional<std::pair<int, int>> parse_container_file_name(const std::string& name) {
  int version = 0;
  int rank = 0;
  if (!format::parse_container_file_name(name, version, rank)) return std::nullopt;
  return std::pair{version, rank};
}

}  // namespace resurgo::tools
