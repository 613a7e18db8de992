#include "format/container.h"

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// Routes XXH3 calls to libxxhash's run-time dispatch (AVX2/AVX-512 where the
// CPU has them); the portable build is SSE2 only and half as fast.
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <array>
#include <cstring>

#include "format/bytes.h"
#include "format/codec.h"
#include "base/printable.h"
#include "resurgo/errors.hpp"

namespace resurgo::format {

namespace {

constexpr char kHeaderMagic[8] = {'R', 'S', 'G', 'C', 'K', 'P', 'T', '\0'};
constexpr char kFooterMagic[8] = {'R', 'S', 'G', 'F', 'O', 'O', 'T', '\0'};
constexpr std::uint32_t kChunkMagic = 0x4b484352;  // "RCHK"
constexpr std::size_t kHeaderPrefixBytes = 24;     // magic, format version, flags, length
constexpr std::size_t kHeaderLengthOffset = 16;
constexpr std::size_t kIndexEntryBytes = kChunkRecordBytes + 8;

// Built in place and appended once: a record is written for every chunk,
// twice (before its bytes and in the index).
void put_record(ByteWriter& out, const ChunkRecord& record) {
  std::array<std::byte, kChunkRecordBytes> bytes{};  // the 7 bytes after the codec stay zero
  std::size_t at = 0;
  const auto field = [&](auto value) {
    std::memcpy(bytes.data() + at, &value, sizeof value);
    at += sizeof value;
  };
  field(kChunkMagic);
  field(record.region);
  field(record.offset);
  field(record.raw_length);
  field(record.stored_length);
  field(static_cast<std::uint8_t>(record.codec));
  at += 7;
  field(record.checksum);
  out.put_bytes(bytes.data(), bytes.size());
}

std::vector<std::byte> serialize_header(const Header& header) {
  // Readers refuse more regions (docs/format.md, "Limits"): never write a
  // version that cannot be read back.
  if (header.regions.size() > kMaxRegions) {
    throw InvalidArgumentError("cannot write version " + std::to_string(header.version) + " of store '" +
                               printable(header.store) + "': it has " + std::to_string(header.regions.size()) +
                               " regions, more than the " + std::to_string(kMaxRegions) +
                               " a version can hold; protect fewer, larger regions");
  }
  // Version 3 only where a device is recorded: the other versions stay
  // readable by releases that read up to version 2.
  const bool records_devices = std::any_of(header.regions.begin(), header.regions.end(),
                                           [](const RegionEntry& region) { return region.device != kDeviceUnknown; });
  std::vector<std::byte> bytes;
  // Room for a header of a few regions at once: written a field at a time,
  // it would otherwise grow from empty several times at every checkpoint.
  bytes.reserve(512 + header.store.size() + header.metadata.size() + 64 * header.regions.size());
  ByteWriter out(bytes);
  out.put_bytes(kHeaderMagic, sizeof kHeaderMagic);
  out.put(records_devices ? kDeviceFormatVersion : kFormatVersion);
  out.put(std::uint32_t{0});  // flags
  out.put(std::uint64_t{0});  // header length, patched below
  out.put_string(header.store);
  out.put_bytes(header.store_id.bytes.data(), header.store_id.bytes.size());
  out.put(header.version);
  out.put(header.rank);
  out.put(header.base_version);
  out.put(header.created_unix_ns);
  out.put(header.chunk_size);
  out.put(static_cast<std::uint32_t>(header.regions.size()));
  for (const RegionEntry& region : header.regions) {
    out.put(region.id);
    out.put_string(region.label);
    out.put(static_cast<std::uint8_t>(region.kind));
    if (records_devices) out.put(region.device);
    out.put(region.bytes);
    out.put_string(region.dtype);
    out.put(static_cast<std::uint32_t>(region.shape.size()));
    for (std::int64_t extent : region.shape) out.put(extent);
  }
  out.put(static_cast<std::uint64_t>(header.metadata.size()));
  out.put_bytes(header.metadata.data(), header.metadata.size());
  const std::uint64_t length = bytes.size();
  std::memcpy(bytes.data() + kHeaderLengthOffset, &length, sizeof length);
  return bytes;
}

std::uint64_t checksum_of(const std::vector<std::byte>& header, const std::vector<std::byte>& index) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, header.data(), header.size());
  XXH3_64bits_update(state, index.data(), index.size());
  const std::uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
}

[[noreturn]] void corrupt(const ReadableFile& file, const std::string& why) {
  throw CorruptionError("checkpoint file '" + printable(file.path()) + "' is damaged: " + why);
}

// A version 3 entry's device must be an ordinal, kDeviceHost or
// kDeviceUnknown, and kDeviceUnknown unless the region is managed: restart
// bounds an ordinal by the devices it has (docs/gpu.md, "Managed memory").
void check_device(const ReadableFile& file, const RegionEntry& region) {
  if (region.device < kDeviceUnknown) {
    corrupt(file, "region '" + printable(region.label) + "' records device " + std::to_string(region.device) +
                      " (neither an ordinal nor -1, the host, nor -2, unknown)");
  }
  if (region.kind != RegionKind::kManaged && region.device != kDeviceUnknown) {
    corrupt(file, "region '" + printable(region.label) + "' is not managed memory but records device " +
                      std::to_string(region.device));
  }
}

// A header's reader: an overrun is damage to the header.
struct HeaderFault {
  const ReadableFile& file;
  [[noreturn]] void operator()(const std::string& why) const { corrupt(file, "header: " + why); }
};
using HeaderReader = ByteReader<HeaderFault>;

RegionEntry parse_region(const ReadableFile& file, HeaderReader& in, std::uint32_t format_version) {
  RegionEntry region;
  region.id = in.get<std::int32_t>("region id");
  region.label = in.get_string("region label", kMaxLabelBytes);
  const auto kind = in.get<std::uint8_t>("region kind");
  if (kind > static_cast<std::uint8_t>(RegionKind::kManaged)) corrupt(file, "unknown region kind " + std::to_string(kind));
  region.kind = static_cast<RegionKind>(kind);
  if (format_version >= kDeviceFormatVersion) {
    region.device = in.get<std::int32_t>("region device");
    check_device(file, region);
  }
  region.bytes = in.get<std::uint64_t>("region size");
  region.dtype = in.get_string("region dtype", kMaxDtypeBytes);
  const auto rank = in.get<std::uint32_t>("region shape rank");
  if (rank > kMaxShapeRank) corrupt(file, "region '" + printable(region.label) + "' has a shape of rank " + std::to_string(rank));
  region.shape.resize(rank);
  for (std::int64_t& extent : region.shape) extent = in.get<std::int64_t>("region shape");
  return region;
}

Header parse_header(const ReadableFile& file, const std::vector<std::byte>& bytes, std::uint32_t format_version) {
  HeaderReader in(bytes.data(), bytes.size(), HeaderFault{file});
  in.take(kHeaderPrefixBytes, "header prefix");
  Header header;
  header.store = in.get_string("store name", kMaxStoreNameBytes);
  if (format_version >= 2) {
    const std::byte* id = in.take(header.store_id.bytes.size(), "store identity");
    std::memcpy(header.store_id.bytes.data(), id, header.store_id.bytes.size());
  }
  header.version = in.get<std::int64_t>("version");
  header.rank = in.get<std::uint32_t>("rank");
  header.base_version = in.get<std::int64_t>("base version");
  header.created_unix_ns = in.get<std::uint64_t>("creation time");
  header.chunk_size = in.get<std::uint64_t>("chunk size");
  const auto region_count = in.get<std::uint32_t>("region count");
  // Bound the count before reserving: by the format's limit, and by what is
  // left of the header (an entry takes at least 25 bytes, 29 with a
  // device), so that parsing costs memory in proportion to the file.
  if (region_count > kMaxRegions) {
    corrupt(file, "region count " + std::to_string(region_count) + " exceeds the limit of " +
                      std::to_string(kMaxRegions) + " regions per version");
  }
  const std::size_t least_entry = format_version >= kDeviceFormatVersion ? 29 : 25;
  if (region_count > in.remaining() / least_entry) {
    corrupt(file, "region count " + std::to_string(region_count) + " exceeds the header size");
  }
  header.regions.resize(region_count);
  for (RegionEntry& region : header.regions) region = parse_region(file, in, format_version);
  const auto metadata_bytes = in.get<std::uint64_t>("metadata length");
  if (metadata_bytes > kMaxMetadataBytes || metadata_bytes > in.remaining()) {
    corrupt(file, "metadata length " + std::to_string(metadata_bytes) + " exceeds the header size");
  }
  const std::byte* metadata = in.take(metadata_bytes, "metadata");
  header.metadata.assign(metadata, metadata + metadata_bytes);
  if (in.remaining() != 0) corrupt(file, "header has " + std::to_string(in.remaining()) + " unexpected trailing bytes");
  return header;
}

std::vector<ChunkRecord> parse_index(const ReadableFile& file, const std::vector<std::byte>& bytes) {
  ByteReader in(bytes.data(), bytes.size(), [&](const std::string& why) { corrupt(file, "index: " + why); });
  const auto count = in.get<std::uint64_t>("chunk count");
  if (count != in.remaining() / kIndexEntryBytes || in.remaining() % kIndexEntryBytes != 0) {
    corrupt(file, "index claims " + std::to_string(count) + " chunks but holds " +
                      std::to_string(in.remaining()) + " bytes");
  }
  std::vector<ChunkRecord> chunks(count);
  for (ChunkRecord& chunk : chunks) {
    if (in.get<std::uint32_t>("chunk magic") != kChunkMagic) corrupt(file, "index entry without chunk magic");
    chunk.region = in.get<std::uint32_t>("chunk region");
    chunk.offset = in.get<std::uint64_t>("chunk offset");
    chunk.raw_length = in.get<std::uint64_t>("chunk raw length");
    chunk.stored_length = in.get<std::uint64_t>("chunk stored length");
    const auto codec = in.get<std::uint8_t>("chunk codec");
    if (!codec_is_known(codec)) corrupt(file, "unknown codec " + std::to_string(codec));
    chunk.codec = static_cast<Codec>(codec);
    in.take(7, "chunk padding");
    chunk.checksum = in.get<std::uint64_t>("chunk checksum");
    chunk.file_offset = in.get<std::uint64_t>("chunk file offset");
  }
  return chunks;
}

std::string describe_chunk(const Container& container, const ChunkRecord& chunk) {
  return "chunk at byte " + std::to_string(chunk.offset) + " of region '" +
         printable(container.header.regions[chunk.region].label) + "'";
}

void check_base(const ReadableFile& file, const Header& header) {
  if (header.base_version < -1 || (header.base_version >= 0 && header.base_version >= header.version)) {
    corrupt(file, "base version " + std::to_string(header.base_version) + " of version " +
                      std::to_string(header.version) + " is neither -1 (full) nor an older version");
  }
}

// Chunk `i` must name a region, lie inside it and inside the data section,
// and claim no more raw bytes than the chunk size allows and its stored
// bytes can decode to: every later buffer is sized by these lengths.
void check_chunk_bounds(const ReadableFile& file, const Container& container, std::size_t i,
                        std::uint64_t data_begin) {
  const ChunkRecord& chunk = container.chunks[i];
  const auto& regions = container.header.regions;
  const std::string name = "chunk " + std::to_string(i);
  if (chunk.region >= regions.size()) {
    corrupt(file, name + " names region " + std::to_string(chunk.region) + " of " + std::to_string(regions.size()));
  }
  const std::uint64_t region_bytes = regions[chunk.region].bytes;
  const std::uint64_t chunk_size = std::min<std::uint64_t>(container.header.chunk_size, kMaxChunkBytes);
  if (chunk.raw_length > chunk_size) corrupt(file, name + " is larger than the chunk size (at most 1 GiB)");
  if (chunk.raw_length == 0 || chunk.raw_length > region_bytes || chunk.offset > region_bytes - chunk.raw_length) {
    corrupt(file, name + " lies outside region '" + printable(regions[chunk.region].label) + "'");
  }
  const bool stored_fits = chunk.file_offset >= data_begin + kChunkRecordBytes &&
                           chunk.file_offset <= container.index_offset &&
                           chunk.stored_length <= container.index_offset - chunk.file_offset;
  if (!stored_fits) corrupt(file, name + " lies outside the data section");
  if (chunk.codec == Codec::kNone && chunk.stored_length != chunk.raw_length) {
    corrupt(file, name + " is uncompressed but its stored and raw lengths differ");
  }
  const std::uint64_t most = max_decoded_bytes(chunk.codec, chunk.stored_length);
  if (chunk.raw_length > most) {
    corrupt(file, describe_chunk(container, chunk) + " claims " + std::to_string(chunk.raw_length) +
                      " raw bytes, more than its " + std::to_string(chunk.stored_length) + " stored bytes of " +
                      to_string(chunk.codec) + " can decode to (" + std::to_string(most) + ")");
  }
}

// The chunks of a full version tile each region exactly: no gap, no
// overlap. A delta holds only the extents written since its base: gaps are
// allowed (the base holds those bytes), overlaps never (a byte would have
// two values).
void check_coverage(const ReadableFile& file, const Container& container) {
  const auto& regions = container.header.regions;
  const bool delta = is_delta(container.header);
  std::vector<std::vector<const ChunkRecord*>> by_region(regions.size());
  for (const ChunkRecord& chunk : container.chunks) by_region[chunk.region].push_back(&chunk);
  for (std::size_t r = 0; r < regions.size(); ++r) {
    auto& chunks = by_region[r];
    std::sort(chunks.begin(), chunks.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    const auto region = [&] { return "region '" + printable(regions[r].label) + "'"; };  // named on failure only
    std::uint64_t covered = 0;
    for (const ChunkRecord* chunk : chunks) {
      if (chunk->offset < covered) {
        corrupt(file, region() + " has overlapping chunks at byte " + std::to_string(chunk->offset));
      }
      if (!delta && chunk->offset != covered) corrupt(file, region() + " has a gap at byte " + std::to_string(covered));
      covered = chunk->offset + chunk->raw_length;  // no overflow: the chunk lies inside the region
    }
    if (!delta && covered != regions[r].bytes) {
      corrupt(file, region() + " is covered up to byte " + std::to_string(covered) + " of " +
                        std::to_string(regions[r].bytes));
    }
  }
}

void check_layout(const ReadableFile& file, const Container& container, std::uint64_t data_begin) {
  check_base(file, container.header);
  for (std::size_t i = 0; i < container.chunks.size(); ++i) check_chunk_bounds(file, container, i, data_begin);
  check_coverage(file, container);
}

template <class T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

}  // namespace


ContainerWriter::ContainerWriter(WritableFile& file, const Header& header)
    : file_(file),
      header_bytes_(serialize_header(header)),
      in_memory_(dynamic_cast<AppendsInMemory*>(&file)) {
  file_.append(header_bytes_.data(), header_bytes_.size());
  position_ = header_bytes_.size();
}

void ContainerWriter::add_chunk(ChunkRecord record, const void* stored_bytes) {
  constexpr std::size_t kGatherBelow = 256u << 10;
  constexpr std::size_t kGatherUpTo = 1u << 20;
  ByteWriter out(pending_);
  put_record(out, record);
  record.file_offset = position_ + kChunkRecordBytes;
  if (in_memory_ == nullptr && record.stored_length < kGatherBelow) {
    out.put_bytes(stored_bytes, record.stored_length);
    if (pending_.size() >= kGatherUpTo) flush();
  } else {
    flush();
    file_.append(stored_bytes, record.stored_length);
  }
  position_ = record.file_offset + record.stored_length;
  chunks_.push_back(record);
}

void ContainerWriter::add_raw_chunk(ChunkRecord record, const void* raw) {
  if (in_memory_ == nullptr) {
    record.checksum = checksum(raw, record.stored_length);
    add_chunk(record, raw);
    return;
  }
  flush();
  const std::uint64_t checksum_at = position_ + kChunkRecordBytes - sizeof record.checksum;  // the record's last field
  ByteWriter out(pending_);
  put_record(out, record);  // its checksum written below, once known
  flush();
  record.file_offset = position_ + kChunkRecordBytes;
  record.checksum = in_memory_->append_hashed(raw, record.stored_length);
  in_memory_->overwrite_appended(checksum_at, &record.checksum, sizeof record.checksum);
  position_ = record.file_offset + record.stored_length;
  chunks_.push_back(record);
}

void ContainerWriter::flush() {
  if (pending_.empty()) return;
  file_.append(pending_.data(), pending_.size());
  pending_.clear();
}

void ContainerWriter::finish() {
  if (finished_) return;
  std::vector<std::byte> index;
  index.reserve(8 + chunks_.size() * kIndexEntryBytes);
  ByteWriter out(index);
  out.put(static_cast<std::uint64_t>(chunks_.size()));
  for (const ChunkRecord& chunk : chunks_) {
    put_record(out, chunk);
    out.put(chunk.file_offset);
  }
  std::vector<std::byte> footer;
  footer.reserve(kFooterBytes);  // written a field at a time: it would grow from empty 4 times per version
  ByteWriter footer_out(footer);
  footer_out.put(static_cast<std::uint64_t>(header_bytes_.size()));
  footer_out.put(position_);
  footer_out.put(static_cast<std::uint64_t>(index.size()));
  footer_out.put(checksum_of(header_bytes_, index));
  footer_out.put_bytes(kFooterMagic, sizeof kFooterMagic);
  flush();
  file_.append(index.data(), index.size());
  file_.append(footer.data(), footer.size());
  position_ += index.size() + footer.size();
  finished_ = true;
}

Container read_container(const ReadableFile& file) {
  const std::uint64_t size = file.size();
  std::byte magic[sizeof kHeaderMagic] = {};
  if (size >= sizeof magic) file.read_at(0, magic, sizeof magic);
  if (size < sizeof magic || std::memcmp(magic, kHeaderMagic, sizeof magic) != 0) {
    throw FormatError("'" + printable(file.path()) + "' is not a Resurgo checkpoint file (no RSGCKPT magic)");
  }
  if (size < kHeaderPrefixBytes + kFooterBytes) corrupt(file, "truncated to " + std::to_string(size) + " bytes");
  std::byte prefix[kHeaderPrefixBytes];
  file.read_at(0, prefix, sizeof prefix);
  const auto format_version = load<std::uint32_t>(prefix + 8);
  if (format_version < kOldestReadableFormatVersion || format_version > kDeviceFormatVersion) {
    throw FormatError("'" + printable(file.path()) + "' has container format version " + std::to_string(format_version) +
                      "; this Resurgo reads versions " + std::to_string(kOldestReadableFormatVersion) + " to " +
                      std::to_string(kDeviceFormatVersion));
  }
  std::byte footer[kFooterBytes];
  file.read_at(size - kFooterBytes, footer, sizeof footer);
  if (std::memcmp(footer + 32, kFooterMagic, sizeof kFooterMagic) != 0) {
    corrupt(file, "no footer (the file is truncated or its end is overwritten)");
  }
  const auto header_length = load<std::uint64_t>(prefix + kHeaderLengthOffset);
  const auto footer_header_length = load<std::uint64_t>(footer);
  const auto index_offset = load<std::uint64_t>(footer + 8);
  const auto index_length = load<std::uint64_t>(footer + 16);
  const auto expected_checksum = load<std::uint64_t>(footer + 24);
  const std::uint64_t index_end = size - kFooterBytes;
  if (header_length != footer_header_length || header_length < kHeaderPrefixBytes ||
      header_length > kMaxHeaderBytes || header_length > index_end || index_offset < header_length ||
      index_offset > index_end || index_length != index_end - index_offset || index_length < 8) {
    corrupt(file, "header and footer disagree on the file layout");
  }
  std::vector<std::byte> header_bytes(header_length);
  std::vector<std::byte> index_bytes(index_length);
  file.read_at(0, header_bytes.data(), header_bytes.size());
  file.read_at(index_offset, index_bytes.data(), index_bytes.size());
  if (checksum_of(header_bytes, index_bytes) != expected_checksum) {
    corrupt(file, "checksum of header and index does not match the footer");
  }
  Container container;
  container.format_version = format_version;
  container.file_size = size;
  container.index_offset = index_offset;
  container.checksum = expected_checksum;
  container.header = parse_header(file, header_bytes, format_version);
  container.chunks = parse_index(file, index_bytes);
  check_layout(file, container, header_length);
  return container;
}

std::string region_table_difference(const Header& delta, const Header& base) {
  if (delta.regions.size() != base.regions.size()) {
    return std::to_string(delta.regions.size()) + " regions against " + std::to_string(base.regions.size());
  }
  for (std::size_t i = 0; i < delta.regions.size(); ++i) {
    const RegionEntry& a = delta.regions[i];
    const RegionEntry& b = base.regions[i];
    const std::string which = "region " + std::to_string(i) + " ('" + printable(a.label) + "')";
    if (a.id != b.id || a.label != b.label) {
      return which + " is '" + printable(b.label) + "' (id " + std::to_string(b.id) + ") in the base";
    }
    if (a.kind != b.kind) return which + " has another kind in the base";
    if (a.bytes != b.bytes) {
      return which + " has " + std::to_string(a.bytes) + " bytes against " + std::to_string(b.bytes);
    }
    if (a.dtype != b.dtype) return which + " is " + printable(a.dtype) + " against " + printable(b.dtype);
    if (a.shape != b.shape) return which + " has another shape in the base";
  }
  return "";
}

void check_identity(const Container& container, const std::string& path, const std::string& store, int version,
                    int rank) {
  const Header& header = container.header;
  const bool same_store = store.empty() || header.store == store;
  if (same_store && header.version == version && header.rank == static_cast<std::uint32_t>(rank)) return;
  throw CorruptionError("checkpoint file '" + printable(path) + "' holds store '" + printable(header.store) + "' version " +
                        std::to_string(header.version) + " rank " + std::to_string(header.rank) + ", expected " +
                        (store.empty() ? std::string() : "'" + store + "' ") + "version " + std::to_string(version) +
                        " rank " + std::to_string(rank) + " (a file renamed in place?)");
}

void check_store_id(const Container& container, const std::string& path, const StoreId& store_id) {
  const StoreId& held = container.header.store_id;
  if (held == store_id) return;
  const std::string whose = held.unknown() ? "carries no store identity (written before stores had one, or by a tool)"
                                            : "was written by another store (identity " + held.hex() + ")";
  throw MismatchError("checkpoint file '" + printable(path) + "' " + whose + ", and this store's identity is " + store_id.hex() +
                      "; a store restarts only from its own versions: set restart.accept_foreign = true to restart "
                      "from a copy of another run's checkpoint");
}

namespace {

void check_record_bytes(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                        const std::byte* record) {
  std::vector<std::byte> expected;
  ByteWriter out(expected);
  put_record(out, chunk);
  if (std::memcmp(record, expected.data(), expected.size()) != 0) {
    corrupt(file, "the record before the chunk at byte " + std::to_string(chunk.offset) + " of region '" +
                      printable(container.header.regions[chunk.region].label) + "' disagrees with the index");
  }
}

// The checks of a chunk's stored bytes once read (`digest` is their
// checksum), before anything is sized by its raw length.
void check_stored(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                  const std::byte* stored, std::uint64_t digest) {
  if (digest != chunk.checksum) corrupt(file, describe_chunk(container, chunk) + " fails its checksum");
  // The stored bytes are as written, so a codec header that contradicts the
  // chunk record was written that way: the file breaks the format.
  const std::string mismatch = framing_mismatch(chunk.codec, stored, chunk.stored_length, chunk.raw_length);
  if (!mismatch.empty()) {
    throw FormatError("checkpoint file '" + printable(file.path()) + "': " + describe_chunk(container, chunk) + " (" +
                      to_string(chunk.codec) + ") breaks the format: " + mismatch);
  }
}

// Reads the stored bytes of `chunk` into `stored`, hashing each piece right
// after reading it, while it is still in the CPU cache: that saves a second
// pass over memory, and restore then costs about one copy out of the page
// cache. A file that ReadsHashed copies and hashes in one pass itself.
// Returns their checksum.
std::uint64_t read_hashed(const ReadableFile& file, const ChunkRecord& chunk, std::byte* stored) {
  if (const auto* in_memory = dynamic_cast<const ReadsHashed*>(&file)) {
    return in_memory->read_hashed_at(chunk.file_offset, stored, chunk.stored_length);
  }
  constexpr std::uint64_t kPiece = 256u << 10;
  if (chunk.stored_length <= kPiece) {  // one piece: no streaming state to allocate
    file.read_at(chunk.file_offset, stored, chunk.stored_length);
    return XXH3_64bits(stored, chunk.stored_length);
  }
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  try {
    for (std::uint64_t done = 0; done < chunk.stored_length; done += kPiece) {
      const std::size_t bytes = std::min(kPiece, chunk.stored_length - done);
      file.read_at(chunk.file_offset + done, stored + done, bytes);
      XXH3_64bits_update(state, stored + done, bytes);
    }
  } catch (...) {
    XXH3_freeState(state);
    throw;
  }
  const std::uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
}

}  // namespace

void check_chunk_record(const ReadableFile& file, const Container& container, const ChunkRecord& chunk) {
  std::byte record[kChunkRecordBytes];
  file.read_at(chunk.file_offset - kChunkRecordBytes, record, sizeof record);
  check_record_bytes(file, container, chunk, record);
}

const std::byte* read_stored(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                             std::vector<std::byte>& scratch) {
  scratch.resize(chunk.stored_length);  // bounded by the file's size (read_container)
  check_stored(file, container, chunk, scratch.data(), read_hashed(file, chunk, scratch.data()));
  return scratch.data();
}

void decode_stored(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                   const std::byte* stored, void* destination) {
  if (chunk.codec == Codec::kNone) {
    if (destination != stored) std::memcpy(destination, stored, chunk.raw_length);
  } else if (!decode(chunk.codec, stored, chunk.stored_length, destination, chunk.raw_length)) {
    corrupt(file, describe_chunk(container, chunk) + " does not decompress (" + to_string(chunk.codec) + ")");
  }
}

void decode_chunk(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                  const std::byte* record, void* destination) {
  check_record_bytes(file, container, chunk, record);
  const std::byte* stored = record + kChunkRecordBytes;
  check_stored(file, container, chunk, stored, XXH3_64bits(stored, chunk.stored_length));
  decode_stored(file, container, chunk, stored, destination);
}

void read_chunk(const ReadableFile& file, const Container& container, const ChunkRecord& chunk,
                void* destination, std::vector<std::byte>& scratch) {
  if (chunk.codec != Codec::kNone) {
    decode_stored(file, container, chunk, read_stored(file, container, chunk, scratch), destination);
    return;
  }
  // Uncompressed bytes go straight where they belong, checked there.
  auto* raw = static_cast<std::byte*>(destination);
  check_stored(file, container, chunk, raw, read_hashed(file, chunk, raw));
}

namespace {

// Appends source bytes [from, to) to `file` in pieces of at most one chunk.
void copy_range(const ReadableFile& source, std::uint64_t from, std::uint64_t to, std::vector<std::byte>& block,
                WritableFile& file) {
  while (from < to) {
    const std::size_t bytes = static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), to - from));
    source.read_at(from, block.data(), bytes);
    file.append(block.data(), bytes);
    from += bytes;
  }
}

}  // namespace

// Streams a container file in file order. read_container has checked the
// header and the index against the footer's checksum; each chunk (its record
// and its stored bytes) is read once, checked, and only then appended, so a
// damaged source never reaches the destination.
void copy_verified(const ReadableFile& source, const format::Container& container, WritableFile& file) {
  std::vector<std::byte> block(1u << 20);
  std::vector<std::byte> chunk_bytes;
  std::uint64_t cursor = 0;
  for (std::size_t i = 0; i < container.chunks.size(); ++i) {
    const format::ChunkRecord& chunk = container.chunks[i];
    const std::uint64_t record_start = chunk.file_offset - format::kChunkRecordBytes;
    copy_range(source, cursor, record_start, block, file);
    format::check_chunk_record(source, container, chunk);
    chunk_bytes.resize(format::kChunkRecordBytes + chunk.stored_length);
    source.read_at(record_start, chunk_bytes.data(), chunk_bytes.size());
    const std::byte* stored = chunk_bytes.data() + format::kChunkRecordBytes;
    if (format::checksum(stored, chunk.stored_length) != chunk.checksum) {
      throw CorruptionError("copy of '" + printable(source.path()) + "' refused: chunk " + std::to_string(i) +
                            " (byte " + std::to_string(chunk.offset) + " of region '" +
                            printable(container.header.regions[chunk.region].label) + "') fails its checksum");
    }
    file.append(chunk_bytes.data(), chunk_bytes.size());
    cursor = chunk.file_offset + chunk.stored_length;
  }
  copy_range(source, cursor, container.file_size, block, file);
}


}  // namespace resurgo::format
