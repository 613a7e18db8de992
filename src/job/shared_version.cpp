#include "job/shared_version.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "format/container.h"
#include "format/file_names.h"
#include "format/shared_file.h"
#include "job/job_text.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr std::size_t kCopyPiece = 8u << 20;  // bytes per read and pwrite of a part

// This rank's committed file of the version, checked before it is copied.
struct OwnPart {
  std::unique_ptr<ReadableFile> file;
  format::SharedPart part;
};

std::optional<OwnPart> own_part(int version, DirectoryLevel& level, int rank, const Logger& log) {
  try {
    OwnPart own{level.open_rank_file(version), {}};
    const format::Container container = format::read_container(*own.file);
    format::check_identity(container, own.file->path(), "", version, rank);
    own.part.bytes = own.file->size();
    own.part.checksum = container.checksum;
    return own;
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ", rank " + std::to_string(rank) +
              ": its L4 file cannot be read back, so no shared file is written: " + error.what());
    return std::nullopt;
  }
}

std::vector<long> gather(Comm& job, long value, double timeout_seconds) {
  return job.size() == 1 ? std::vector<long>{value} : job.allgather(value, timeout_seconds);
}

bool on_every_rank(Comm& job, bool mine) { return job.size() == 1 ? mine : job.allreduce_min(mine ? 1 : 0) == 1; }

// Rank 0 makes the temporary and tells every rank its name ("" when it failed).
std::string agree_on_temporary(int version, DirectoryLevel& level, Comm& job, const Logger& log) {
  if (job.rank() != 0) return receive_text(job, 0, "a shared file's name");
  std::string name;
  try {
    name = level.create_shared_temporary(version);
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ": the shared file cannot be created in " + level.where() +
              ": " + error.what());
  }
  for (int rank = 1; rank < job.size(); ++rank) send_text(job, rank, name);
  return name;
}

void copy_part(const OwnPart& own, PositionalFile& shared) {
  std::vector<std::byte> piece(std::min<std::uint64_t>(kCopyPiece, own.part.bytes));
  for (std::uint64_t done = 0; done < own.part.bytes; done += piece.size()) {
    const std::size_t bytes = static_cast<std::size_t>(std::min<std::uint64_t>(piece.size(), own.part.bytes - done));
    own.file->read_at(done, piece.data(), bytes);
    shared.write_at(own.part.offset + done, piece.data(), bytes);
  }
}

// This rank's part, and on rank 0 the part index too (`index`: empty on the
// others), made durable with one fdatasync. The index may precede the other
// parts: nobody reads the file before it is published.
bool write_part(int version, const OwnPart& own, DirectoryLevel& level, const std::string& temporary,
                const std::vector<std::byte>& index, std::uint64_t index_offset, int rank, const Logger& log) {
  try {
    const std::unique_ptr<PositionalFile> shared = level.open_shared_temporary(temporary);
    copy_part(own, *shared);
    if (!index.empty()) shared->write_at(index_offset, index.data(), index.size());
    shared->sync();
    return true;
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ", rank " + std::to_string(rank) + ": its part of '" +
              level.dir() + "/" + temporary + "' could not be written, so the version is not packed: " + error.what());
    return false;
  }
}

// Rank 0, once every part is durable: the file's name.
bool publish(int version, DirectoryLevel& level, const std::string& temporary, const Logger& log) {
  try {
    level.publish_shared(temporary, version);
    return true;
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ": its shared file in " + level.where() +
              " could not be published: " + error.what());
    return false;
  }
}

}  // namespace

std::vector<std::uint64_t> part_offsets(const std::vector<std::uint64_t>& sizes) {
  std::vector<std::uint64_t> offsets;
  std::uint64_t next = 0;
  for (std::uint64_t size : sizes) {
    offsets.push_back(next);
    if (next + size < next) throw StateError("the ranks' parts of a shared file add up to more than 2^64 bytes");
    next += size;
  }
  return offsets;
}

bool write_shared_version(int version, DirectoryLevel& level, Comm& job, const Logger& log, double timeout_seconds) {
  const int rank = job.rank();
  std::optional<OwnPart> own = own_part(version, level, rank, log);
  const std::vector<long> sizes = gather(job, own ? static_cast<long>(own->part.bytes) : -1, timeout_seconds);
  const std::vector<long> checksums = gather(job, own ? static_cast<long>(own->part.checksum) : 0, timeout_seconds);
  if (std::any_of(sizes.begin(), sizes.end(), [](long size) { return size < 0; })) return false;
  format::SharedIndex index{version, {}};
  const std::vector<std::uint64_t> offsets = part_offsets({sizes.begin(), sizes.end()});
  for (std::size_t each = 0; each < sizes.size(); ++each) {
    index.parts.push_back({offsets[each], static_cast<std::uint64_t>(sizes[each]),
                           static_cast<std::uint64_t>(checksums[each])});
  }
  own->part.offset = offsets[static_cast<std::size_t>(rank)];
  const std::uint64_t index_offset = offsets.back() + index.parts.back().bytes;
  const std::vector<std::byte> index_bytes =
      rank == 0 ? format::encode_shared_index(index, index_offset) : std::vector<std::byte>{};
  const std::string temporary = agree_on_temporary(version, level, job, log);
  const bool written =
      !temporary.empty() && write_part(version, *own, level, temporary, index_bytes, index_offset, rank, log);
  if (!on_every_rank(job, written)) {
    if (rank == 0 && !temporary.empty()) level.discard_temporary(temporary);
    return false;
  }
  const bool published = rank != 0 || publish(version, level, temporary, log);
  if (rank == 0 && !published) level.discard_temporary(temporary);
  return on_every_rank(job, published);
}

}  // namespace resurgo
