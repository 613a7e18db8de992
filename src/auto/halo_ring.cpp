#include "auto/halo_ring.h"

#include <cstring>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

// Each row (the last dimension) lies in the ring whole when one of its
// leading indices is within `depth` of a border; otherwise only its first
// and last `depth` elements do.
HaloRing::HaloRing(const std::vector<std::int64_t>& shape, std::size_t element_bytes, int depth) {
  for (const std::int64_t extent : shape) {
    if (extent <= 2 * static_cast<std::int64_t>(depth)) {
      throw InvalidArgumentError("a halo of depth " + std::to_string(depth) + " needs every extent of the shape above " +
                                 std::to_string(2 * depth) + ", but one is " + std::to_string(extent));
    }
  }
  const std::uint64_t row = static_cast<std::uint64_t>(shape.back()) * element_bytes;
  const std::uint64_t edge = static_cast<std::uint64_t>(depth) * element_bytes;
  std::vector<std::int64_t> index(shape.size() - 1, 0);
  std::uint64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= static_cast<std::uint64_t>(shape[d]);
  for (std::uint64_t r = 0; r < rows; ++r) {
    bool in_ring = false;
    for (std::size_t d = 0; d < index.size(); ++d) {
      in_ring = in_ring || index[d] < depth || index[d] >= shape[d] - depth;
    }
    if (in_ring) {
      add(r * row, row);
    } else {
      add(r * row, edge);
      add(r * row + row - edge, edge);
    }
    for (std::size_t d = index.size(); d-- > 0;) {  // the next row, last leading index fastest
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

void HaloRing::add(std::uint64_t offset, std::uint64_t bytes) {
  bytes_ += bytes;
  if (!runs_.empty() && runs_.back().offset + runs_.back().bytes == offset) {
    runs_.back().bytes += bytes;
  } else {
    runs_.push_back({offset, bytes});
  }
}

void HaloRing::pack(const std::byte* array, std::byte* out) const {
  for (const Run& run : runs_) {
    std::memcpy(out, array + run.offset, run.bytes);
    out += run.bytes;
  }
}

void HaloRing::unpack(const std::byte* in, std::byte* array) const {
  for (const Run& run : runs_) {
    std::memcpy(array + run.offset, in, run.bytes);
    in += run.bytes;
  }
}

}  // namespace resurgo::autockpt
