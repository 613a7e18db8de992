#include "format/shared_file.h"

#include <cstring>

#include "base/checksum.h"
#include "format/bytes.h"
#include "resurgo/errors.hpp"

namespace resurgo::format {

namespace {

constexpr std::uint64_t kSharedMagic = 0x4552414853475352ULL;  // "RSGSHARE" little-endian
constexpr std::uint32_t kSharedFormat = 1;

[[noreturn]] void torn(const ReadableFile& file, const std::string& why) {
  throw CorruptionError("shared file '" + file.path() + "' is torn or damaged (" + why +
                        "): its version cannot be restored from it; restart from an older version");
}

class PartFile final : public ReadableFile {
 public:
  PartFile(std::shared_ptr<const ReadableFile> file, const SharedPart& part, int rank)
      : file_(std::move(file)),
        part_(part),
        path_(file_->path() + " (rank " + std::to_string(rank) + "'s part at offset " + std::to_string(part.offset) +
              ")") {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
    const std::optional<std::uint64_t> end = checked_add<std::uint64_t>(offset, bytes);
    if (!end || *end > part_.bytes) {
      throw StorageError("read of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) + " runs past '" +
                         path_ + "' (" + std::to_string(part_.bytes) + " bytes)");
    }
    file_->read_at(part_.offset + offset, data, bytes);
  }
  std::uint64_t size() const override { return part_.bytes; }
  const std::string& path() const override { return path_; }

 private:
  std::shared_ptr<const ReadableFile> file_;
  SharedPart part_;
  std::string path_;
};

void check_parts(const ReadableFile& file, const SharedIndex& index, std::uint64_t index_offset) {
  std::uint64_t next = 0;
  for (std::size_t rank = 0; rank < index.parts.size(); ++rank) {
    const SharedPart& part = index.parts[rank];
    const std::optional<std::uint64_t> end = checked_add(part.offset, part.bytes);
    if (part.offset < next || !end || *end > index_offset) {
      torn(file, "rank " + std::to_string(rank) + "'s part at " + std::to_string(part.offset) + " of " +
                     std::to_string(part.bytes) + " bytes overlaps another or runs into the part index");
    }
    next = *end;
  }
}

}  // namespace

std::vector<std::byte> encode_shared_index(const SharedIndex& index, std::uint64_t index_offset) {
  std::vector<std::byte> bytes;
  ByteWriter out(bytes);
  for (const SharedPart& part : index.parts) {
    out.put(part.offset);
    out.put(part.bytes);
    out.put(part.checksum);
  }
  out.put(kSharedMagic);
  out.put(kSharedFormat);
  out.put(static_cast<std::uint32_t>(index.parts.size()));
  out.put(index.version);
  out.put(index_offset);
  out.put(checksum(bytes.data(), bytes.size()));
  return bytes;
}

SharedIndex read_shared_index(const ReadableFile& file) {
  const std::uint64_t size = file.size();
  if (size < kSharedFooterBytes) torn(file, std::to_string(size) + " bytes, shorter than its footer");
  std::byte footer[kSharedFooterBytes];
  file.read_at(size - kSharedFooterBytes, footer, kSharedFooterBytes);
  ByteReader reader(footer, kSharedFooterBytes, [&](const std::string& what) { torn(file, what); });
  const auto magic = reader.get<std::uint64_t>("magic");
  const auto format = reader.get<std::uint32_t>("format");
  const auto ranks = reader.get<std::uint32_t>("ranks");
  SharedIndex index;
  index.version = reader.get<std::int64_t>("version");
  const auto index_offset = reader.get<std::uint64_t>("index offset");
  const auto stored_checksum = reader.get<std::uint64_t>("checksum");
  if (magic != kSharedMagic) torn(file, "no shared footer at its end: truncated, or not a shared file");
  if (format != kSharedFormat) torn(file, "shared format " + std::to_string(format) + ", this build reads 1");
  const std::uint64_t index_bytes = std::uint64_t{ranks} * kSharedPartBytes;
  if (ranks == 0 || ranks > kMaxSharedRanks || index_offset > size ||
      size - index_offset != index_bytes + kSharedFooterBytes) {
    torn(file, "its footer names " + std::to_string(ranks) + " parts and an index at " + std::to_string(index_offset) +
                   ", which do not end at its size " + std::to_string(size));
  }
  std::vector<std::byte> bytes(index_bytes + kSharedFooterBytes);
  file.read_at(index_offset, bytes.data(), bytes.size());
  if (checksum(bytes.data(), bytes.size() - sizeof(std::uint64_t)) != stored_checksum) {
    torn(file, "the checksum of its part index does not match");
  }
  ByteReader parts(bytes.data(), index_bytes, [&](const std::string& what) { torn(file, what); });
  for (std::uint32_t rank = 0; rank < ranks; ++rank) {
    SharedPart part;
    part.offset = parts.get<std::uint64_t>("part offset");
    part.bytes = parts.get<std::uint64_t>("part size");
    part.checksum = parts.get<std::uint64_t>("part checksum");
    index.parts.push_back(part);
  }
  check_parts(file, index, index_offset);
  return index;
}

std::unique_ptr<ReadableFile> open_part(std::shared_ptr<const ReadableFile> file, const SharedPart& part, int rank) {
  return std::make_unique<PartFile>(std::move(file), part, rank);
}

}  // namespace resurgo::format
