// FNV-1a, 64 bits: the automatic runtime's hashes of names, declarations and
// loop sequences (compared between a run and its replay, and between ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace resurgo::autockpt {

inline constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;

// `hash` continued over `bytes` bytes at `data`.
inline std::uint64_t fnv(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* begin = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ begin[i]) * 1099511628211ull;
  return hash;
}

inline std::uint64_t fnv(std::uint64_t hash, std::string_view text) { return fnv(hash, text.data(), text.size()); }

}  // namespace resurgo::autockpt
