// The halo ring of a row-major array: the elements within `depth` of a
// border in any dimension. A dataset whose interior a checkpointing region
// drops may still need its ring saved; the ring is then packed into a
// contiguous buffer and unpacked on restore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resurgo::autockpt {

class HaloRing {
 public:
  // Throws InvalidArgumentError unless every extent is larger than twice the depth.
  HaloRing(const std::vector<std::int64_t>& shape, std::size_t element_bytes, int depth);

  std::uint64_t bytes() const { return bytes_; }
  void pack(const std::byte* array, std::byte* out) const;
  void unpack(const std::byte* in, std::byte* array) const;

 private:
  struct Run {
    std::uint64_t offset = 0;  // in bytes, in the array
    std::uint64_t bytes = 0;
  };
  void add(std::uint64_t offset, std::uint64_t bytes);

  std::vector<Run> runs_;  // ascending, merged where adjacent
  std::uint64_t bytes_ = 0;
};

}  // namespace resurgo::autockpt
