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

constexpr std::size_t kCountBytes = 8;

}  // namespace

QueryLog::QueryLog() : encoded_(kCountBytes) {}

void QueryLog::put_count(std::uint64_t count) {
  for (std::size_t i = 0; i < kCountBytes; ++i) encoded_[i] = static_cast<std::byte>(count >> (8 * i));
}

void QueryLog::append(std::uint64_t loop_index, std::uint32_t sequence, const void* data, std::size_t bytes) {
  put_varint(encoded_, loop_index - last_loop_index_);
  put_varint(encoded_, bytes);
  for (int shift = 0; shift < 32; shift += 8) encoded_.push_back(static_cast<std::byte>(sequence >> shift));
  const auto* begin = static_cast<const std::byte*>(data);
  encoded_.insert(encoded_.end(), begin, begin + bytes);
  last_loop_index_ = loop_index;
  put_count(++count_);
}

void QueryLog::clear() {
  encoded_.assign(kCountBytes, std::byte{0});
  encoded_.shrink_to_fit();
  count_ = 0;
  last_loop_index_ = 0;
}

void QueryLog::assign(std::vector<std::byte> encoded, std::uint64_t count, std::uint64_t last_loop_index) {
  encoded_ = std::move(encoded);
  count_ = count;
  last_loop_index_ = last_loop_index;
}

QueryReplay::QueryReplay(std::vector<std::byte> encoded, std::string_view what) : encoded_(std::move(encoded)) {
  if (encoded_.size() < kCountBytes) {
    throw CorruptionError("the query log of " + std::string(what) + " is damaged: it has no record count");
  }
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < kCountBytes; ++i) count |= static_cast<std::uint64_t>(encoded_[i]) << (8 * i);
  std::uint64_t position = kCountBytes;
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
