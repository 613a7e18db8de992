#include "matrix/part_checksums.h"

#include <algorithm>
#include <bit>

namespace resurgo {

namespace {

// SplitMix64's finalizer over the index and the bits: every input bit
// reaches every output bit.
std::uint64_t mix_position(std::uint64_t index, std::uint64_t bits) {
  std::uint64_t x = bits + index * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
std::uint64_t bits_of(T value) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<std::uint32_t>(value);
  } else {
    return std::bit_cast<std::uint64_t>(value);
  }
}

}  // namespace

template <typename T>
void add_part_sums(const T* elements, std::uint64_t first, std::uint64_t count, std::uint64_t part_elements,
                   std::vector<std::uint64_t>& sums) {
  for (std::uint64_t at = first; at < first + count;) {
    const std::uint64_t part = at / part_elements;
    const std::uint64_t end = std::min(first + count, (part + 1) * part_elements);
    // A sum in a register: one in memory would chain every addition through a store and a load.
    std::uint64_t sum = 0;
    for (std::uint64_t index = at; index < end; ++index) sum += mix_position(index, bits_of(elements[index - first]));
    sums[part] += sum;
    at = end;
  }
}

template void add_part_sums<float>(const float*, std::uint64_t, std::uint64_t, std::uint64_t,
                                   std::vector<std::uint64_t>&);
template void add_part_sums<double>(const double*, std::uint64_t, std::uint64_t, std::uint64_t,
                                    std::vector<std::uint64_t>&);

}  // namespace resurgo
