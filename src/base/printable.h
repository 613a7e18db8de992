// Text from outside the library (a label, a store name, a path, a
// configuration key or value, a dtype or file name read from a file) as it
// goes into an error message or a log line: control characters (C0, DEL,
// C1, the Unicode line separators) and bytes that are not UTF-8 are written
// as \xNN, and text past kMaxPrintableBytes is cut. A message then moves no
// terminal cursor, forges no log line, stays short, and stays valid UTF-8,
// which the Python bindings need to raise it as the right exception.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace resurgo {

inline constexpr std::size_t kMaxPrintableBytes = 4096;  // a path of PATH_MAX bytes fits

namespace printable_detail {

// The length of the UTF-8 sequence starting at text[i], 0 when it is not one.
inline std::size_t sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  const std::size_t length = lead < 0x80 ? 1 : lead < 0xC2 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF5 ? 4 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  // Overlong forms, surrogates and code points above U+10FFFF.
  if ((lead == 0xE0 && byte(1) < 0xA0) || (lead == 0xED && byte(1) > 0x9F) || (lead == 0xF0 && byte(1) < 0x90) ||
      (lead == 0xF4 && byte(1) > 0x8F)) {
    return 0;
  }
  return length;
}

// C0, DEL, C1 (U+0080-U+009F) and U+2028/U+2029, given a valid sequence.
inline bool is_control(std::string_view sequence) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(sequence[k]); };
  if (sequence.size() == 1) return byte(0) < 0x20 || byte(0) == 0x7F;
  if (sequence.size() == 2) return byte(0) == 0xC2 && byte(1) < 0xA0;
  return sequence.size() == 3 && byte(0) == 0xE2 && byte(1) == 0x80 && (byte(2) == 0xA8 || byte(2) == 0xA9);
}

}  // namespace printable_detail

inline std::string printable(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (i >= kMaxPrintableBytes) return out + "... (" + std::to_string(text.size()) + " bytes)";
    const std::size_t length = printable_detail::sequence_length(text, i);
    const std::string_view sequence = text.substr(i, length == 0 ? 1 : length);
    if (length != 0 && !printable_detail::is_control(sequence)) {
      out += sequence;
    } else {
      for (const char c : sequence) {
        char escaped[5];
        std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
        out += escaped;
      }
    }
    i += sequence.size();
  }
  return out;
}

}  // namespace resurgo
