#include "auto/query_log.h"

#include <cstring>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

// Record: varint(loop index - previous record's), varint(value bytes),
// u32 sequence (little-endian), value.
void put_varint(std::vector<std::byte>& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<std::byte>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<std::byte>(value));
}

bool get_varint(const std::vector<std::byte>& in, std::uint64_t& position, std::uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && position < in.size(); shift += 7) {
    const auto byte = static_cast<std::uint64_t>(in[position++]);
    value |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

std::string describe_query(std::uint64_t number, std::uint64_t loop_index, std::uint64_t bytes) {
  return "query #" + std::to_string(number + 1) + " (" + std::to_string(bytes) + " bytes) after loop " +
         std::to_string(loop_index);
}

constexpr std::size_t kMinimumBuffer = 4096;

std::uint64_t get_u64(const std::vector<std::byte>& in, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return value;
}

}  // namespace

QueryLog::QueryLog() : buffer_(kMinimumBuffer) {}

void QueryLog::put_header(std::uint64_t count, std::uint64_t used) {
  for (std::size_t i = 0; i < 8; ++i) {
    buffer_[i] = static_cast<std::byte>(count >> (8 * i));
    buffer_[8 + i] = static_cast<std::byte>(used >> (8 * i));
  }
}

void QueryLog::append(std::uint64_t loop_index, std::uint32_t sequence, const void* data, std::size_t bytes) {
  std::vector<std::byte> record;
  put_varint(record, loop_index - last_loop_index_);
  put_varint(record, bytes);
  for (int shift = 0; shift < 32; shift += 8) record.push_back(static_cast<std::byte>(sequence >> shift));
  const std::size_t needed = used_ + record.size() + bytes;
  if (needed > buffer_.size()) {
    std::size_t size = buffer_.size();
    while (size < needed) size *= 2;
    buffer_.resize(size);
  }
  std::memcpy(buffer_.data() + used_, record.data(), record.size());
  if (bytes > 0) std::memcpy(buffer_.data() + used_ + record.size(), data, bytes);
  used_ = needed;
  last_loop_index_ = loop_index;
  put_header(++count_, used_);
}

void QueryLog::clear() {
  buffer_.assign(kMinimumBuffer, std::byte{0});
  buffer_.shrink_to_fit();
  used_ = kHeaderBytes;
  count_ = 0;
  last_loop_index_ = 0;
}

void QueryLog::assign(std::vector<std::byte> encoded, std::uint64_t count, std::uint64_t last_loop_index) {
  used_ = static_cast<std::size_t>(get_u64(encoded, 8));
  buffer_ = std::move(encoded);
  std::fill(buffer_.begin() + static_cast<long>(used_), buffer_.end(), std::byte{0});
  count_ = count;
  last_loop_index_ = last_loop_index;
}

QueryReplay::QueryReplay(std::vector<std::byte> encoded, std::string_view what) : encoded_(std::move(encoded)) {
  if (encoded_.size() < QueryLog::kHeaderBytes) {
    throw CorruptionError("the query log of " + std::string(what) + " is damaged: it has no header");
  }
  const std::uint64_t count = get_u64(encoded_, 0);
  const std::uint64_t used = get_u64(encoded_, 8);
  if (used < QueryLog::kHeaderBytes || used > encoded_.size()) {
    throw CorruptionError("the query log of " + std::string(what) + " is damaged: it claims " + std::to_string(used) +
                          " bytes of a region of " + std::to_string(encoded_.size()));
  }
  encoded_.resize(used);
  std::uint64_t position = QueryLog::kHeaderBytes;
  std::uint64_t loop_index = 0;
  const auto damaged = [&](const std::string& why) {
    return CorruptionError("the query log of " + std::string(what) + " is damaged: " + why + " at record " +
                           std::to_string(records_.size() + 1));
  };
  while (position < encoded_.size()) {
    std::uint64_t delta = 0;
    std::uint64_t bytes = 0;
    if (!get_varint(encoded_, position, delta) || !get_varint(encoded_, position, bytes)) throw damaged("a bad length");
    if (encoded_.size() - position < 4 || encoded_.size() - position - 4 < bytes) throw damaged("a value past the end");
    std::uint32_t sequence = 0;
    for (int shift = 0; shift < 32; shift += 8) sequence |= static_cast<std::uint32_t>(encoded_[position++]) << shift;
    loop_index += delta;
    records_.push_back({loop_index, sequence, position, bytes});
    position += bytes;
  }
  if (records_.size() != count) {
    throw CorruptionError("the query log of " + std::string(what) + " holds " + std::to_string(records_.size()) +
                          " records where its header counts " + std::to_string(count));
  }
}

void QueryReplay::next(std::uint64_t loop_index, std::uint32_t sequence, std::string_view loop_name, void* data,
                       std::size_t bytes) {
  const std::string here = "loop " + std::to_string(loop_index) + " '" + std::string(loop_name) + "'";
  if (position_ >= records_.size()) {
    throw MismatchError("replay diverged: after " + here + " the application asks query #" +
                        std::to_string(position_ + 1) + " but the checkpointed run asked only " +
                        std::to_string(records_.size()) + " before its checkpoint");
  }
  const Record& record = records_[position_];
  if (record.loop_index != loop_index || record.bytes != bytes || record.sequence != sequence) {
    throw MismatchError("replay diverged: after " + here + " the application asks " +
                        describe_query(position_, loop_index, bytes) + " but the checkpointed run asked " +
                        describe_query(position_, record.loop_index, record.bytes) +
                        (record.sequence != sequence ? " after another sequence of loops" : "") +
                        "; the control flow must depend only on queried values");
  }
  std::memcpy(data, encoded_.data() + record.offset, bytes);
  ++position_;
}

}  // namespace resurgo::autockpt
