// inspect(), verify() and read_region(): the container reader
// (format/container.h) for files read without a store.
#include <filesystem>
#include <memory>
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

ContainerInfo info_of(const format::Container& container) {
  const format::Header& header = container.header;
  ContainerInfo info;
  info.store = header.store;
  info.version = header.version;
  info.rank = header.rank;
  info.base_version = header.base_version;
  info.created_unix_ns = header.created_unix_ns;
  info.chunk_size = header.chunk_size;
  info.metadata = header.metadata;
  for (const format::RegionEntry& region : header.regions) {
    info.regions.push_back(
        {region.id, region.label, region.bytes, {region.dtype, region.shape}, static_cast<MemoryKind>(region.kind)});
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

// Every rank's part of a shared file (format/shared_file.h), each checked
// as verify() checks a container file, against the version the file's name
// says and the part's rank and checksum in the part index.
VerifyReport verify_shared(const std::string& path, int version, const VerifyProgress& progress) {
  const std::shared_ptr<const ReadableFile> file = Env::posix()->open(path);
  const format::SharedIndex index = format::read_shared_index(*file);
  if (index.version != version) {
    throw CorruptionError("shared file '" + path + "' holds version " + std::to_string(index.version) + ", not " +
                          std::to_string(version) + " as its name says");
  }
  VerifyReport report{0, 0};
  for (std::size_t rank = 0; rank < index.parts.size(); ++rank) {
    const std::unique_ptr<ReadableFile> part = format::open_part(file, index.parts[rank], static_cast<int>(rank));
    const format::Container container = format::read_container(*part);
    format::check_identity(container, part->path(), "", version, static_cast<int>(rank));
    if (container.checksum != index.parts[rank].checksum) {
      throw CorruptionError("'" + part->path() + "' is not the part the index of version " + std::to_string(version) +
                            " names (its checksum differs)");
    }
    const std::uint64_t before = report.bytes;
    format::verify_chunks(*part, container, [&](std::uint64_t done, std::uint64_t total) {
      report.bytes = before + total;
      if (progress && done == total) progress(before + done, before + total);
    });
    report.chunks += container.chunks.size();
  }
  return report;
}

}  // namespace

ContainerInfo inspect(const std::string& path) { return info_of(open_container(path).container); }

VerifyReport verify(const std::string& path, const VerifyProgress& progress) {
  int shared_version = 0;
  if (format::parse_shared_file_name(std::filesystem::path(path).filename().string(), shared_version)) {
    return verify_shared(path, shared_version, progress);
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

std::optional<std::pair<int, int>> parse_container_file_name(const std::string& name) {
  int version = 0;
  int rank = 0;
  if (!format::parse_container_file_name(name, version, rank)) return std::nullopt;
  return std::pair{version, rank};
}

}  // namespace resurgo::tools
