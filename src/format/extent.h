// Extent: bytes of one region as a capture hands them to the writer. A full
// version has one extent per region; a delta has the blocks written since
// its base, ascending and disjoint within each region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resurgo {

struct Extent {
  std::uint32_t region = 0;  // index into the version's region table
  std::uint64_t offset = 0;  // byte offset inside the region
  std::uint64_t bytes = 0;
  const std::byte* source = nullptr;
};

inline std::uint64_t total_bytes(const std::vector<Extent>& extents) {
  std::uint64_t total = 0;
  for (const Extent& extent : extents) total += extent.bytes;
  return total;
}

}  // namespace resurgo
