#include "matrix/part_checksums.h"

#include <algorithm>
#include <bit>
#include <cstring>

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

// Eight terms at a time in GCC/Clang vector types (the sum is the same in
// any order), cloned for AVX-512 and AVX2 on x86-64 where the compiler
// supports it: one term at a time, the sums took about as long as the
// write they accompany. Elements [first, first + count) of one part.
// Not under TSan: the clones' resolver (an IFUNC) runs while the dynamic
// loader relocates the library, before TSan's runtime is set up, and
// crashed there.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define RESURGO_CLONED __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RESURGO_CLONED
#endif

using Lanes = std::uint64_t __attribute__((vector_size(64)));
using HalfLanes = std::uint32_t __attribute__((vector_size(32)));

// The bits of eight elements.
template <typename T>
struct BitLanes {
  using type = Lanes;
};
template <>
struct BitLanes<float> {
  using type = HalfLanes;
};

template <typename T>
RESURGO_CLONED std::uint64_t part_sum(const T* elements, std::uint64_t first, std::uint64_t count) {
  Lanes index = {0, 1, 2, 3, 4, 5, 6, 7};
  index += first;
  Lanes sums = {};
  std::uint64_t done = 0;
  for (; done + 8 <= count; done += 8) {
    typename BitLanes<T>::type bits;
    std::memcpy(&bits, elements + done, sizeof(bits));
    Lanes x = __builtin_convertvector(bits, Lanes) + index * 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    sums += x ^ (x >> 31);
    index += 8;
  }
  std::uint64_t sum = 0;
  for (int lane = 0; lane < 8; ++lane) sum += sums[lane];
  for (; done < count; ++done) sum += mix_position(first + done, bits_of(elements[done]));
  return sum;
}

}  // namespace

template <typename T>
void add_part_sums(const T* elements, std::uint64_t first, std::uint64_t count, std::uint64_t part_elements,
                   std::vector<std::uint64_t>& sums) {
  for (std::uint64_t at = first; at < first + count;) {
    const std::uint64_t part = at / part_elements;
    const std::uint64_t end = std::min(first + count, (part + 1) * part_elements);
    sums[part] += part_sum(elements + (at - first), at, end - at);
    at = end;
  }
}

template void add_part_sums<float>(const float*, std::uint64_t, std::uint64_t, std::uint64_t,
                                   std::vector<std::uint64_t>&);
template void add_part_sums<double>(const double*, std::uint64_t, std::uint64_t, std::uint64_t,
                                    std::vector<std::uint64_t>&);

}  // namespace resurgo
