#include "base/copy_checksum.h"

#include <cstring>

#include "base/checksum.h"

// The one-pass kernels are XXH3's long-input loop (stripes of 64 bytes, a
// scramble per block, the last stripe, the merge: copy_checksum_loop.inl)
// written over xxhash.h's own internals (secret, scramble, merge,
// constants): only the loop and the stripe's accumulation, on registers
// loaded once for the copy, are written here, and
// tests/cpp/copy_checksum_test.cpp compares every kernel's value with
// XXH3_64bits at every length around the loop's bounds. This file is
// compiled on its own (src/CMakeLists.txt: not in a unity batch), since
// XXH_INLINE_ALL must not meet another include of xxhash.h. GCC and clang,
// each with its own pragma that compiles a stretch of functions for an
// instruction set, and libxxhash 0.8.1 only (below); elsewhere the
// two-pass path.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define XXH_INLINE_ALL
#define XXH_X86DISPATCH  // accumulators aligned for AVX-512, as libxxhash's dispatcher has them
#define XXH_DISPATCH_AVX2 1
#define XXH_DISPATCH_AVX512 1
#define XXH_TARGET_AVX2 __attribute__((__target__("avx2")))
#define XXH_TARGET_AVX512 __attribute__((__target__("avx512f")))
#include <xxhash.h>
// Those internals are no API: names and constants of one release's
// implementation. The kernels are built only against the release they were
// checked with (0.8.1, Debian 12's libxxhash); with another, copy_checksum
// copies then hashes, which is right at any release.
#if XXH_VERSION_NUMBER == 801
#define RESURGO_COPY_CHECKSUM_X86 1
#endif
#define RESURGO_PRAGMA(text) _Pragma(#text)
#if defined(__clang__)
#define RESURGO_TARGET_PUSH(isa) RESURGO_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define RESURGO_TARGET_POP RESURGO_PRAGMA(clang attribute pop)
#else
#define RESURGO_TARGET_PUSH(isa) RESURGO_PRAGMA(GCC push_options) RESURGO_PRAGMA(GCC target(isa))
#define RESURGO_TARGET_POP RESURGO_PRAGMA(GCC pop_options)
#endif
#endif

namespace resurgo {

namespace {

#if RESURGO_COPY_CHECKSUM_X86
// GCC 12's AVX-512 intrinsics start some results from a deliberately
// undefined vector (_mm512_undefined_epi32), which -Wuninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

RESURGO_TARGET_PUSH("avx512f")
namespace avx512 {

using Lanes = __m512i;
inline Lanes load_lanes(const xxh_u64* lanes) { return _mm512_load_si512(lanes); }
inline void store_lanes(xxh_u64* lanes, Lanes acc) { _mm512_store_si512(lanes, acc); }
inline void scramble(xxh_u64* lanes, const xxh_u8* secret) { XXH3_scrambleAcc_avx512(lanes, secret); }

// XXH3_accumulate_512_avx512 on a stripe loaded once, and stored.
inline void copy_stripe(Lanes& acc, xxh_u8* destination, const xxh_u8* source, const xxh_u8* secret) {
  const __m512i data = _mm512_loadu_si512(source);
  _mm512_storeu_si512(destination, data);
  const __m512i data_key = _mm512_xor_si512(data, _mm512_loadu_si512(secret));
  const __m512i data_key_lo = _mm512_shuffle_epi32(data_key, static_cast<_MM_PERM_ENUM>(_MM_SHUFFLE(0, 3, 0, 1)));
  const __m512i product = _mm512_mul_epu32(data_key, data_key_lo);
  const __m512i data_swap = _mm512_shuffle_epi32(data, static_cast<_MM_PERM_ENUM>(_MM_SHUFFLE(1, 0, 3, 2)));
  acc = _mm512_add_epi64(product, _mm512_add_epi64(acc, data_swap));
}

#include "base/copy_checksum_loop.inl"

}  // namespace avx512
RESURGO_TARGET_POP

RESURGO_TARGET_PUSH("avx2")
namespace avx2 {

struct Lanes {
  __m256i half[2];
};
inline Lanes load_lanes(const xxh_u64* lanes) {
  return {{_mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)),
           _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 4))}};
}
inline void store_lanes(xxh_u64* lanes, const Lanes& acc) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc.half[0]);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 4), acc.half[1]);
}
inline void scramble(xxh_u64* lanes, const xxh_u8* secret) { XXH3_scrambleAcc_avx2(lanes, secret); }

// XXH3_accumulate_512_avx2 on a stripe loaded once, and stored.
inline void copy_stripe(Lanes& acc, xxh_u8* destination, const xxh_u8* source, const xxh_u8* secret) {
  for (int i = 0; i < 2; ++i) {
    const __m256i data = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source) + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(destination) + i, data);
    const __m256i data_key = _mm256_xor_si256(data, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(secret) + i));
    const __m256i data_key_lo = _mm256_shuffle_epi32(data_key, _MM_SHUFFLE(0, 3, 0, 1));
    const __m256i product = _mm256_mul_epu32(data_key, data_key_lo);
    const __m256i data_swap = _mm256_shuffle_epi32(data, _MM_SHUFFLE(1, 0, 3, 2));
    acc.half[i] = _mm256_add_epi64(product, _mm256_add_epi64(acc.half[i], data_swap));
  }
}

#include "base/copy_checksum_loop.inl"

}  // namespace avx2
RESURGO_TARGET_POP

#pragma GCC diagnostic pop
#endif

std::uint64_t copy_then_checksum(void* destination, const void* source, std::size_t bytes) {
  if (bytes > 0) std::memcpy(destination, source, bytes);
  return checksum(destination, bytes);
}

CopyKernel fastest_kernel() {
#if RESURGO_COPY_CHECKSUM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CopyKernel::kAvx512;
  if (__builtin_cpu_supports("avx2")) return CopyKernel::kAvx2;
#endif
  return CopyKernel::kTwoPass;
}

}  // namespace

bool runs(CopyKernel kernel) {
  static const CopyKernel fastest = fastest_kernel();
  return static_cast<int>(kernel) <= static_cast<int>(fastest);
}

std::uint64_t copy_checksum(CopyKernel kernel, void* destination, const void* source, std::size_t bytes) {
#if RESURGO_COPY_CHECKSUM_X86
  auto* to = static_cast<xxh_u8*>(destination);
  const auto* from = static_cast<const xxh_u8*>(source);
  if (bytes > XXH3_MIDSIZE_MAX && kernel == CopyKernel::kAvx512) return avx512::copy_checksum_long(to, from, bytes);
  if (bytes > XXH3_MIDSIZE_MAX && kernel == CopyKernel::kAvx2) return avx2::copy_checksum_long(to, from, bytes);
#endif
  return copy_then_checksum(destination, source, bytes);
}

std::uint64_t copy_checksum(void* destination, const void* source, std::size_t bytes) {
  static const CopyKernel fastest = fastest_kernel();
  return copy_checksum(fastest, destination, source, bytes);
}

}  // namespace resurgo
