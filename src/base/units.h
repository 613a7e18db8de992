// Sizes in messages and logs, and the rounding of sizes to a multiple:
// written once for every folder.
#pragma once

#include <cstdint>
#include <string>

namespace resurgo {

inline constexpr std::uint64_t kKiB = std::uint64_t{1} << 10;
inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// "512 bytes", "3.25 MiB", "1.50 GiB".
std::string size_text(std::uint64_t bytes);

// A quarter of the node's physical memory (0 when unknown): the default
// bound of the buffers and of the memory level.
std::uint64_t quarter_of_physical_memory();

// `value` rounded up to a multiple of `multiple` (> 0).
constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace resurgo
