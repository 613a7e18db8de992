#include "auto/checkpoint_record.h"

#include <cstdint>
#include <cstring>

#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

constexpr char kMagic[8] = {'R', 'S', 'G', 'A', 'U', 'T', 'O', '1'};
constexpr std::size_t kMaxLocationBytes = 4096;
constexpr std::uint64_t kMaxSavedLabels = 1 << 20;

void put_u64(std::vector<std::byte>& out, std::uint64_t value) {
  for (int shift = 0; shift < 64; shift += 8) out.push_back(static_cast<std::byte>(value >> shift));
}

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& what) : bytes_(bytes), what_(what) {}
  std::uint64_t u64() {
    need(8);
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 8) value |= static_cast<std::uint64_t>(bytes_[position_++]) << shift;
    return value;
  }
  std::uint8_t u8() {
    need(1);
    return static_cast<std::uint8_t>(bytes_[position_++]);
  }
  std::string text(std::size_t bytes) {
    need(bytes);
    std::string value(reinterpret_cast<const char*>(bytes_.data() + position_), bytes);
    position_ += bytes;
    return value;
  }
  bool done() const { return position_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw CorruptionError("the automatic checkpoint record of " + what_ + " is damaged: " + why);
  }

 private:
  void need(std::size_t bytes) const {
    if (bytes_.size() - position_ < bytes) fail("it ends early");
  }
  std::span<const std::byte> bytes_;
  const std::string& what_;
  std::size_t position_ = 0;
};

}  // namespace

std::vector<std::byte> encode(const CheckpointRecord& record) {
  std::vector<std::byte> out(reinterpret_cast<const std::byte*>(kMagic),
                             reinterpret_cast<const std::byte*>(kMagic) + sizeof kMagic);
  out.push_back(static_cast<std::byte>(record.kind));
  out.push_back(static_cast<std::byte>(record.has_payload ? 1 : 0));
  out.push_back(static_cast<std::byte>(record.init_end ? 1 : 0));
  put_u64(out, record.loop_index);
  put_u64(out, record.init_end.value_or(0));
  put_u64(out, record.sequence_hash);
  const auto put_text = [&](const std::string& text) {
    put_u64(out, text.size());
    const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
    out.insert(out.end(), bytes, bytes + text.size());
  };
  put_text(record.location);
  if (record.ranks == 0) return out;
  put_u64(out, record.ranks);
  out.push_back(static_cast<std::byte>(record.global ? 1 : 0));
  if (!record.global) return out;
  put_u64(out, record.query_log_bytes);
  put_u64(out, record.payload_bytes);
  put_u64(out, record.saved.size());
  for (const std::string& label : record.saved) put_text(label);
  return out;
}

std::optional<CheckpointRecord> decode(std::span<const std::byte> metadata, const std::string& what) {
  if (metadata.size() < sizeof kMagic || std::memcmp(metadata.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader reader(metadata.subspan(sizeof kMagic), what);
  CheckpointRecord record;
  const std::uint8_t kind = reader.u8();
  if (kind > static_cast<std::uint8_t>(CheckpointKind::kDatlist)) reader.fail("unknown kind " + std::to_string(kind));
  record.kind = static_cast<CheckpointKind>(kind);
  record.has_payload = reader.u8() != 0;
  const bool has_init_end = reader.u8() != 0;
  record.loop_index = reader.u64();
  const std::uint64_t init_end = reader.u64();
  if (has_init_end) record.init_end = init_end;
  record.sequence_hash = reader.u64();
  const std::uint64_t location_bytes = reader.u64();
  if (location_bytes > kMaxLocationBytes) reader.fail("a location name of " + std::to_string(location_bytes) + " bytes");
  record.location = reader.text(static_cast<std::size_t>(location_bytes));
  if (reader.done()) return record;
  const std::uint64_t ranks = reader.u64();
  if (ranks == 0 || ranks > INT32_MAX) reader.fail("a rank count of " + std::to_string(ranks));
  record.ranks = static_cast<std::uint32_t>(ranks);
  record.global = reader.u8() != 0;
  if (!record.global) return record;
  record.query_log_bytes = reader.u64();
  record.payload_bytes = reader.u64();
  const std::uint64_t labels = reader.u64();
  if (labels > kMaxSavedLabels) reader.fail(std::to_string(labels) + " saved datasets");
  for (std::uint64_t i = 0; i < labels; ++i) {
    const std::uint64_t bytes = reader.u64();
    if (bytes > kMaxLocationBytes) reader.fail("a dataset label of " + std::to_string(bytes) + " bytes");
    record.saved.push_back(reader.text(static_cast<std::size_t>(bytes)));
  }
  return record;
}

}  // namespace resurgo::autockpt
