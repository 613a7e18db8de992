#include "matrix/part_checksums.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace resurgo {

namespace {

constexpr std::uint64_t kIndexFactor = 0x9e3779b97f4a7c15ULL;

// SplitMix64's finalizer over the index and the bits: every input bit
// reaches every output bit.
std::uint64_t mix_position(std::uint64_t index, std::uint64_t bits) {
  std::uint64_t x = bits + index * kIndexFactor;
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

// Eight terms at a time, in two groups of four 64-bit lanes (GCC/Clang
// vector types: the sum is the same in any order), cloned for AVX-512 and
// AVX2 on x86-64 where the compiler supports it. Four lanes are one AVX2
// register: with eight lanes in one vector type, GCC 12 kept the AVX2
// clone's halves on the stack between operations, and the sums took 5.7
// times as long as a memcpy of the same bytes on this project's
// development VM, against 1.2 times in four-lane groups
// (bench/results/matrix_kernels.md).
// The index's multiple is advanced by addition rather than multiplied
// anew: one 64-bit multiply per term fewer, the same terms.
// Elements [first, first + count) of one part.
// Not under TSan: the clones' resolver (an IFUNC) runs while the dynamic
// loader relocates the library, before TSan's runtime is set up, and
// crashed there.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define RESURGO_CLONED __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RESURGO_CLONED
#endif

using Lanes = std::uint64_t __attribute__((vector_size(32)));

// The bits of four elements (a float's 32 widened to 64).
template <typename T>
struct BitLanes {
  using type = Lanes;
};
template <>
struct BitLanes<float> {
  using type = std::uint32_t __attribute__((vector_size(16)));
};

template <typename T>
RESURGO_CLONED std::uint64_t part_sum(const T* elements, std::uint64_t first, std::uint64_t count) {
  Lanes low = (Lanes{0, 1, 2, 3} + first) * kIndexFactor;  // terms of elements 0-3 of each eight
  Lanes high = (Lanes{4, 5, 6, 7} + first) * kIndexFactor;  // and 4-7
  Lanes low_sums = {};
  Lanes high_sums = {};
  std::uint64_t done = 0;
  for (; done + 8 <= count; done += 8) {
    typename BitLanes<T>::type low_bits;
    typename BitLanes<T>::type high_bits;
    std::memcpy(&low_bits, elements + done, sizeof(low_bits));
    std::memcpy(&high_bits, elements + done + 4, sizeof(high_bits));
    Lanes x = __builtin_convertvector(low_bits, Lanes) + low;
    Lanes y = __builtin_convertvector(high_bits, Lanes) + high;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    y = (y ^ (y >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    y = (y ^ (y >> 27)) * 0x94d049bb133111ebULL;
    low_sums += x ^ (x >> 31);
    high_sums += y ^ (y >> 31);
    low += 8 * kIndexFactor;
    high += 8 * kIndexFactor;
  }
  const Lanes sums = low_sums + high_sums;
  std::uint64_t sum = sums[0] + sums[1] + sums[2] + sums[3];
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
