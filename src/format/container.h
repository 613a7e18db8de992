// Container file: one file per version per rank. Layout (docs/format.md):
//   header | chunk records (record header + stored bytes)... | index | footer
// The footer holds the index offset and an XXH3-64 checksum of header+index;
// each chunk carries an XXH3-64 checksum of its stored bytes. A reader bounds
// every length by the file size and the region sizes before allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "base/names.h"
#include "resurgo/config.hpp"
#include "format/store_id.h"
#include "resurgo/env.hpp"

namespace resurgo::format {

// Version 2 added the store identity; version 1 files are read with an
// unknown one. Version 3 added the device that held each managed region
// (RegionEntry::device), and is written only for a version that records
// one: every other version is still written as version 2, byte for byte
// what releases before it wrote and read (docs/format.md, "Header").
inline constexpr std::uint32_t kFormatVersion = 2;        // a version that records no device
inline constexpr std::uint32_t kDeviceFormatVersion = 3;  // one that does; the newest a reader reads
inline constexpr std::uint32_t kOldestReadableFormatVersion = 1;
inline constexpr std::size_t kFooterBytes = 40;
inline constexpr std::size_t kChunkRecordBytes = 48;
// The limits of docs/format.md, "Limits": a reader refuses a file beyond
// them before allocating anything sized by it, and the writer never writes one.
inline constexpr std::size_t kMaxStoreNameBytes = 128;
inline constexpr std::size_t kMaxRegions = 65536;  // per version: bounds the parsed region table
inline constexpr std::size_t kMaxMetadataBytes = 16u << 20;
inline constexpr std::size_t kMaxShapeRank = 32;
inline constexpr std::size_t kMaxDtypeBytes = 64;
inline constexpr std::uint64_t kMaxChunkBytes = 1u << 30;  // bounds a reader's chunk buffers
inline constexpr std::size_t kMaxHeaderBytes = 64u << 20;
// The largest region entry: id, label, kind, device, size, dtype, shape rank and shape.
inline constexpr std::size_t kMaxRegionEntryBytes =
    4 + 4 + kMaxLabelBytes + 1 + 4 + 8 + 4 + kMaxDtypeBytes + 4 + 8 * kMaxShapeRank;
static_assert(kMaxHeaderBytes >= 256 + kMaxStoreNameBytes + kMaxRegions * kMaxRegionEntryBytes + kMaxMetadataBytes,
              "every header within the other limits must fit under kMaxHeaderBytes");

enum class RegionKind : std::uint8_t { kHost = 0, kDevice = 1, kManaged = 2 };

// RegionEntry::device of a managed region that was last put on the host
// (restart leaves it there), and of every region whose device is not
// known: host and device regions, a managed region the driver says nothing
// of, and every region of a version 1 or 2 file (restart puts a managed one
// on the store's device). The values of CU_DEVICE_CPU and CU_DEVICE_INVALID.
inline constexpr std::int32_t kDeviceHost = -1;
inline constexpr std::int32_t kDeviceUnknown = -2;

struct RegionEntry {
  std::int32_t id = 0;
  std::string label;
  RegionKind kind = RegionKind::kHost;
  std::uint64_t bytes = 0;
  std::string dtype;  // "" when unknown
  std::vector<std::int64_t> shape;
  // A managed region's device when captured: an ordinal, kDeviceHost or
  // kDeviceUnknown (always, for the other kinds). Not part of the region
  // table a delta shares with its base: the pages move between versions.
  std::int32_t device = kDeviceUnknown;
};

struct Header {
  std::string store;
  StoreId store_id;
  std::int64_t version = 0;
  std::uint32_t rank = 0;
  std::int64_t base_version = -1;  // delta versions name their base; -1 = full
  std::uint64_t created_unix_ns = 0;
  std::uint64_t chunk_size = 0;
  std::vector<RegionEntry> regions;
  std::vector<std::byte> metadata;
};

struct ChunkRecord {
  std::uint32_t region = 0;  // index into Header::regions
  std::uint64_t offset = 0;  // byte offset inside the region
  std::uint64_t raw_length = 0;
  std::uint64_t stored_length = 0;
  Codec codec = Codec::kNone;
  std::uint64_t checksum = 0;     // XXH3-64 of the stored bytes
  std::uint64_t file_offset = 0;  // where the stored bytes start in the file
};

struct Container {
  std::uint32_t format_version = 0;  // 1 to kDeviceFormatVersion, as the file says
  Header header;
  std::vector<ChunkRecord> chunks;  // in file order
  std::uint64_t file_size = 0;
  std::uint64_t index_offset = 0;
  std::uint64_t checksum = 0;  // of header and index, from the footer: identifies the file's content
};

// A WritableFile whose append is a copy into memory, not a system call
// (the memory level's): ContainerWriter appends its chunks as they are,
// since gathering them first would only add a copy, and computes a raw
// chunk's checksum in the pass that copies it (append_hashed), writing it
// into the chunk's record afterwards (overwrite_appended): such a file is
// read by no one before it is complete.
class AppendsInMemory {
 public:
  // Appends the bytes and returns checksum() of them, in one pass where it can.
  virtual std::uint64_t append_hashed(const void* data, std::size_t bytes) = 0;
  // The longest chunk append_hashed copies and hashes in one pass, and that
  // a restore then reads and verifies in one pass: a writer cuts the chunks
  // it appends here at this size.
  virtual std::uint64_t longest_run() const = 0;
  // Overwrites [offset, offset + bytes), appended already.
  virtual void overwrite_appended(std::uint64_t offset, const void* data, std::size_t bytes) = 0;

 protected:
  ~AppendsInMemory() = default;
};

// A ReadableFile that reads out of memory (the memory level's): it copies
// bytes and computes their checksum in one pass, and a chunk read from it
// is verified that way, not by a read then a checksum pass over the copy.
class ReadsHashed {
 public:
  // Reads [offset, offset + bytes) into `data`; returns checksum() of them.
  virtual std::uint64_t read_hashed_at(std::uint64_t offset, void* data, std::size_t bytes) const = 0;

 protected:
  ~ReadsHashed() = default;
};

// Streams one container into `file`. Call add_chunk for the chunks of every
// region (any order), then finish(). Does not sync or close the file. Small
// chunks (a delta's blocks) are gathered and written a MiB at a time: two
// system calls per 4 KiB block cost more than writing it. A file that
// AppendsInMemory gets each record and chunk appended as it comes.
class ContainerWriter {
 public:
  ContainerWriter(WritableFile& file, const Header& header);
  // `record`'s file_offset is filled in by the writer.
  void add_chunk(ChunkRecord record, const void* stored_bytes);
  // An uncompressed chunk whose checksum is not known yet: the writer
  // computes it, in one pass with its copy where the file AppendsInMemory.
  void add_raw_chunk(ChunkRecord record, const void* raw);
  // Whether add_raw_chunk computes checksums where add_chunk's caller would
  // spend a pass of its own.
  bool hashes_while_appending() const { return in_memory_ != nullptr; }
  void finish();
  std::uint64_t bytes_written() const { return position_; }

 private:
  void flush();

  WritableFile& file_;
  std::vector<std::byte> header_bytes_;
  std::vector<ChunkRecord> chunks_;
  std::vector<std::byte> pending_;  // records and small chunks not written yet
  std::uint64_t position_ = 0;
  AppendsInMemory* in_memory_;  // null: gathers small chunks
  bool finished_ = false;
};

// A delta version holds only the extents written since its base version
// (Header::base_version >= 0); a full version (-1) holds every byte.
inline bool is_delta(const Header& header) { return header.base_version >= 0; }

// Parses and validates header, index and footer (structure, bounds, chunk
// layout, header+index checksum). The chunks of a full version tile every
// region; those of a delta lie inside their regions without overlapping, and
// its base is an older version. Throws FormatError
// for a file that is not a Resurgo container (or an unsupported version) and
// CorruptionError for a damaged one; messages name the path and the cause.
Container read_container(const ReadableFile& file);

// Checks that the header names `store` (any store when empty), `version` and
// `rank`: a file of another version or store renamed in place is damage.
// Throws CorruptionError naming the path and both identities.
void check_identity(const Container& container, const std::string& path, const std::string& store, int version,
                    int rank);
// MismatchError unless `container` was written by the store of identity
// `store_id` (a version 1 file, of unknown identity, was not).
void check_store_id(const Container& container, const std::string& path, const StoreId& store_id);

// Empty when a delta's region table equals its base's (count, ids, labels,
// kinds, sizes, dtypes, shapes; not devices), else what differs first, for messages.
std::string region_table_difference(const Header& delta, const Header& base);

// Reads one chunk, verifies its checksum and decodes it into `destination`
// (raw_length bytes). `scratch` is reused between calls for stored bytes.
// Throws CorruptionError naming the path, region label and chunk, or
// FormatError when a codec header that passes the checksum contradicts the
// chunk record (a blosc header or zstd frame announcing another size).
void read_chunk(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                void* destination, std::vector<std::byte>& scratch);

// The two halves of read_chunk, for a reader that sizes the decode buffer
// itself: read_stored reads the stored bytes into `scratch` and checks them
// (checksum, codec framing against raw_length) before anything is sized by
// raw_length; decode_stored then decodes them into `destination`.
const std::byte* read_stored(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                             std::vector<std::byte>& scratch);
void decode_stored(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                   const std::byte* stored, void* destination);

// The same checks and decoding for a chunk read together with its
// neighbours: `record` points at the chunk's record as read from the file,
// its stored bytes following. Restore reads runs of small chunks this way,
// one read per run instead of two per chunk.
void decode_chunk(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                  const std::byte* record, void* destination);

// Checks that the chunk record stored before the chunk's bytes in the data
// section agrees with the index entry. Restore relies on the checksummed
// index alone; verification also checks these redundant copies.
void check_chunk_record(const ReadableFile& file, const Container& container, const ChunkRecord& chunk);

// Reads every chunk and verifies it (record and data) without keeping the data. Calls
// `progress(bytes_done, bytes_total)` after each chunk when given.
template <class Progress>
void verify_chunks(const ReadableFile& file, const Container& container, Progress&& progress);

using resurgo::checksum;  // base/checksum.h

// Appends the container `source` (read_container's result `container`) to
// `file` in file order, each chunk checked before it is appended, so that a
// damaged source never reaches another level. Throws CorruptionError naming
// the chunk and its region.
void copy_verified(const ReadableFile& source, const Container& container, WritableFile& file);

}  // namespace resurgo::format

#include "format/container_verify.inl"
