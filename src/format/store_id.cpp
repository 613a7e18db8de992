#include "format/store_id.h"

#include <algorithm>

#include "base/random.h"

namespace resurgo::format {

bool StoreId::unknown() const {
  return std::all_of(bytes.begin(), bytes.end(), [](std::uint8_t byte) { return byte == 0; });
}

std::string StoreId::hex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string text;
  for (const std::uint8_t byte : bytes) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

StoreId StoreId::random() {
  StoreId id;
  fill_random(id.bytes.data(), id.bytes.size());
  if (id.unknown()) id.bytes[0] = 1;  // all zeros means "unknown"
  return id;
}

std::optional<StoreId> StoreId::parse(const std::string& text) {
  if (text.size() != 32) return std::nullopt;
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  StoreId id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) {
    const int high = digit(text[2 * i]);
    const int low = digit(text[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    id.bytes[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return id;
}

}  // namespace resurgo::format
