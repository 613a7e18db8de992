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

constexpr std::size_t kCopyPiece = 8u << 20;        // bytes per read and pwrite of a copied part
constexpr std::uint64_t kSlotSlack = 1u << 20;      // a slot's room for header, index and metadata
constexpr std::uint64_t kSlotAlignment = 64u << 10;  // slots start on these boundaries

// This rank's part of the version, checked before it is placed: in its
// slot of the shared temporary, or its own file.
struct OwnPart {
  std::unique_ptr<ReadableFile> file;
  format::SharedPart part;
};

std::optional<OwnPart> own_part(int version, DirectoryLevel& level, const TakenSlot& taken, int rank,
                                const Logger& log) {
  try {
    OwnPart own{taken.bytes ? level.open_shared_temporary_part(*taken.slot, *taken.bytes, rank)
                            : level.open_rank_file(version),
                {}};
    const format::Container container = format::read_container(*own.file);
    format::check_identity(container, own.file->path(), "", version, rank);
    own.part.bytes = own.file->size();
    own.part.checksum = container.checksum;
    return own;
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ", rank " + std::to_string(rank) +
              ": its L4 part cannot be read back, so no shared file is written: " + error.what());
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
  const std::size_t piece_bytes = static_cast<std::size_t>(std::min<std::uint64_t>(kCopyPiece, own.part.bytes));
  const std::unique_ptr<std::byte[]> piece(new std::byte[piece_bytes]);
  for (std::uint64_t done = 0; done < own.part.bytes; done += piece_bytes) {
    const std::size_t bytes = static_cast<std::size_t>(std::min<std::uint64_t>(piece_bytes, own.part.bytes - done));
    own.file->read_at(done, piece.get(), bytes);
    shared.write_at(own.part.offset + done, piece.get(), bytes);
  }
}

// Where the parts go: each in its slot when every rank's commit filled
// its own (`copy` false), else one after the other, each copied there.
struct Placement {
  std::string temporary;
  format::SharedIndex index;
  std::uint64_t index_offset = 0;
  bool copy = true;
};

Placement place_parts(int version, const std::vector<long>& sizes, const std::vector<long>& checksums,
                      const std::vector<long>& slot_offsets, const TakenSlot& taken, DirectoryLevel& level,
                      Comm& job, const Logger& log) {
  Placement placement;
  placement.copy = std::any_of(slot_offsets.begin(), slot_offsets.end(), [](long offset) { return offset < 0; });
  std::vector<std::uint64_t> offsets(slot_offsets.begin(), slot_offsets.end());
  if (placement.copy) {
    offsets = part_offsets({sizes.begin(), sizes.end()});
    placement.index_offset = offsets.back() + static_cast<std::uint64_t>(sizes.back());
    placement.temporary = agree_on_temporary(version, level, job, log);
  } else {
    placement.index_offset = taken.slot->end;
    placement.temporary = taken.slot->temporary;
  }
  placement.index.version = version;
  for (std::size_t each = 0; each < sizes.size(); ++each) {
    placement.index.parts.push_back({offsets[each], static_cast<std::uint64_t>(sizes[each]),
                                     static_cast<std::uint64_t>(checksums[each])});
  }
  return placement;
}

// This rank's part (copied unless its commit wrote it in place), and on
// rank 0 the part index too, made durable with one fdatasync. The index may
// precede the other parts: nobody reads the file before it is published.
bool write_part(int version, OwnPart& own, DirectoryLevel& level, const Placement& placement, int rank,
                const Logger& log) {
  try {
    const std::unique_ptr<PositionalFile> shared = level.open_shared_temporary(placement.temporary);
    own.part.offset = placement.index.parts[static_cast<std::size_t>(rank)].offset;
    if (placement.copy) copy_part(own, *shared);
    if (rank == 0) {
      const std::vector<std::byte> index = format::encode_shared_index(placement.index, placement.index_offset);
      shared->write_at(placement.index_offset, index.data(), index.size());
    }
    shared->sync();
    return true;
  } catch (const Error& error) {
    log.error("version " + std::to_string(version) + ", rank " + std::to_string(rank) + ": its part of '" +
              level.dir() + "/" + placement.temporary + "' could not be written, so the version is not packed: " +
              error.what());
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

// Rank 0: the version's temporaries (its slots' and the one its parts were
// copied into), but the one published as its file.
void discard(DirectoryLevel& level, int rank, const std::vector<std::string>& temporaries,
             const std::string& published = "") {
  if (rank != 0) return;
  for (std::size_t each = 0; each < temporaries.size(); ++each) {
    const std::string& name = temporaries[each];
    const bool again = each > 0 && name == temporaries[each - 1];
    if (!name.empty() && name != published && !again) level.discard_temporary(name);
  }
}

std::string slot_temporary(const TakenSlot& taken) { return taken.slot ? taken.slot->temporary : ""; }

std::uint64_t round_up(std::uint64_t bytes, std::uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// write_shared_version's steps; the version's slot is forgotten after.
bool place_and_publish(int version, DirectoryLevel& level, Comm& job, const Logger& log, double timeout_seconds) {
  const int rank = job.rank();
  const TakenSlot taken = level.shared_slots().find(version);
  std::optional<OwnPart> own = own_part(version, level, taken, rank, log);
  const std::vector<long> sizes = gather(job, own ? static_cast<long>(own->part.bytes) : -1, timeout_seconds);
  const std::vector<long> checksums = gather(job, own ? static_cast<long>(own->part.checksum) : 0, timeout_seconds);
  const long slot_offset = own && taken.bytes ? static_cast<long>(taken.slot->offset) : -1;
  const std::vector<long> slot_offsets = gather(job, slot_offset, timeout_seconds);
  if (std::any_of(sizes.begin(), sizes.end(), [](long size) { return size < 0; })) {
    discard(level, rank, {slot_temporary(taken)});
    return false;
  }
  const Placement placement = place_parts(version, sizes, checksums, slot_offsets, taken, level, job, log);
  const bool written = !placement.temporary.empty() && write_part(version, *own, level, placement, rank, log);
  if (!on_every_rank(job, written)) {
    discard(level, rank, {slot_temporary(taken), placement.temporary});
    return false;
  }
  const bool published = rank != 0 || publish(version, level, placement.temporary, log);
  discard(level, rank, {slot_temporary(taken), placement.temporary}, published ? placement.temporary : "");
  return on_every_rank(job, published);
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

std::uint64_t slot_capacity(std::uint64_t region_bytes) {
  return round_up(region_bytes + region_bytes / 64 + kSlotSlack, kSlotAlignment);
}

void reserve_shared_slots(int version, bool agreed, std::uint64_t region_bytes, DirectoryLevel& level, Comm& job,
                          const Logger& log, double timeout_seconds) {
  std::optional<SharedSlot> slot;
  try {
    if (agreed) {
      const std::vector<long> capacities =
          gather(job, static_cast<long>(slot_capacity(region_bytes)), timeout_seconds);
      const std::string temporary = agree_on_temporary(version, level, job, log);
      const std::vector<std::uint64_t> offsets = part_offsets({capacities.begin(), capacities.end()});
      const auto rank = static_cast<std::size_t>(job.rank());
      const std::uint64_t end = offsets.back() + static_cast<std::uint64_t>(capacities.back());
      const auto capacity = static_cast<std::uint64_t>(capacities[rank]);
      if (!temporary.empty()) slot = SharedSlot{temporary, offsets[rank], capacity, end};
    }
  } catch (...) {
    level.shared_slots().answer(version, std::nullopt);
    throw;
  }
  level.shared_slots().answer(version, std::move(slot));
}

void abandon_shared_slot(int version, DirectoryLevel& level, int rank) {
  discard(level, rank, {slot_temporary(level.shared_slots().find(version))});
  level.shared_slots().forget(version);
}

bool write_shared_version(int version, DirectoryLevel& level, Comm& job, const Logger& log, double timeout_seconds) {
  const bool written = place_and_publish(version, level, job, log, timeout_seconds);
  level.shared_slots().forget(version);
  return written;
}

}  // namespace resurgo
