#include "matrix/transpose.h"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RESURGO_TRANSPOSE_AVX2 1
#endif

namespace resurgo {

namespace {

// Element by element, in tiles of 16 x 16 so that both sides stay in cache;
// the inner loop runs along the destination: stores that run along memory
// cost less than loads that do.
template <typename T>
void transpose_in_tiles(const T* source, std::int64_t source_stride, T* destination, std::int64_t destination_stride,
                        std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 16;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const std::int64_t r_end = std::min(rows, r0 + kTile);
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t c_end = std::min(cols, c0 + kTile);
      for (std::int64_t c = c0; c < c_end; ++c) {
        for (std::int64_t r = r0; r < r_end; ++r) destination[c * destination_stride + r] = source[r * source_stride + c];
      }
    }
  }
}

#if RESURGO_TRANSPOSE_AVX2

// One square of kSide x kSide elements (one AVX2 register per line).
template <typename T>
constexpr std::int64_t kSide = 32 / sizeof(T);

__attribute__((target("avx2"))) void transpose_square(const float* source, std::int64_t source_stride,
                                                      float* destination, std::int64_t destination_stride) {
  const __m256 line0 = _mm256_loadu_ps(source);
  const __m256 line1 = _mm256_loadu_ps(source + source_stride);
  const __m256 line2 = _mm256_loadu_ps(source + 2 * source_stride);
  const __m256 line3 = _mm256_loadu_ps(source + 3 * source_stride);
  const __m256 line4 = _mm256_loadu_ps(source + 4 * source_stride);
  const __m256 line5 = _mm256_loadu_ps(source + 5 * source_stride);
  const __m256 line6 = _mm256_loadu_ps(source + 6 * source_stride);
  const __m256 line7 = _mm256_loadu_ps(source + 7 * source_stride);
  // Lines 2k and 2k + 1 interleaved, within each 128-bit lane.
  const __m256 low01 = _mm256_unpacklo_ps(line0, line1);
  const __m256 high01 = _mm256_unpackhi_ps(line0, line1);
  const __m256 low23 = _mm256_unpacklo_ps(line2, line3);
  const __m256 high23 = _mm256_unpackhi_ps(line2, line3);
  const __m256 low45 = _mm256_unpacklo_ps(line4, line5);
  const __m256 high45 = _mm256_unpackhi_ps(line4, line5);
  const __m256 low67 = _mm256_unpacklo_ps(line6, line7);
  const __m256 high67 = _mm256_unpackhi_ps(line6, line7);
  // Columns c and c + 4 of lines 0-3 (and of lines 4-7), one per 128-bit lane.
  const __m256 column0_03 = _mm256_shuffle_ps(low01, low23, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 column1_03 = _mm256_shuffle_ps(low01, low23, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 column2_03 = _mm256_shuffle_ps(high01, high23, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 column3_03 = _mm256_shuffle_ps(high01, high23, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 column0_47 = _mm256_shuffle_ps(low45, low67, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 column1_47 = _mm256_shuffle_ps(low45, low67, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 column2_47 = _mm256_shuffle_ps(high45, high67, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 column3_47 = _mm256_shuffle_ps(high45, high67, _MM_SHUFFLE(3, 2, 3, 2));
  float* column = destination;
  _mm256_storeu_ps(column, _mm256_permute2f128_ps(column0_03, column0_47, 0x20));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column1_03, column1_47, 0x20));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column2_03, column2_47, 0x20));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column3_03, column3_47, 0x20));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column0_03, column0_47, 0x31));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column1_03, column1_47, 0x31));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column2_03, column2_47, 0x31));
  _mm256_storeu_ps(column += destination_stride, _mm256_permute2f128_ps(column3_03, column3_47, 0x31));
}

__attribute__((target("avx2"))) void transpose_square(const double* source, std::int64_t source_stride,
                                                      double* destination, std::int64_t destination_stride) {
  const __m256d line0 = _mm256_loadu_pd(source);
  const __m256d line1 = _mm256_loadu_pd(source + source_stride);
  const __m256d line2 = _mm256_loadu_pd(source + 2 * source_stride);
  const __m256d line3 = _mm256_loadu_pd(source + 3 * source_stride);
  const __m256d even_low = _mm256_unpacklo_pd(line0, line1);  // columns 0 and 2 of lines 0 and 1
  const __m256d odd_low = _mm256_unpackhi_pd(line0, line1);   // columns 1 and 3
  const __m256d even_high = _mm256_unpacklo_pd(line2, line3);  // the same of lines 2 and 3
  const __m256d odd_high = _mm256_unpackhi_pd(line2, line3);
  _mm256_storeu_pd(destination, _mm256_permute2f128_pd(even_low, even_high, 0x20));
  _mm256_storeu_pd(destination + destination_stride, _mm256_permute2f128_pd(odd_low, odd_high, 0x20));
  _mm256_storeu_pd(destination + 2 * destination_stride, _mm256_permute2f128_pd(even_low, even_high, 0x31));
  _mm256_storeu_pd(destination + 3 * destination_stride, _mm256_permute2f128_pd(odd_low, odd_high, 0x31));
}

// Squares in bands of one cache line of destination (two squares of floats,
// two of doubles, 64 bytes each), so that a destination line is written
// whole before the band moves on; the edges element by element.
template <typename T>
__attribute__((target("avx2"))) void transpose_in_squares(const T* source, std::int64_t source_stride,
                                                          T* destination, std::int64_t destination_stride,
                                                          std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kSquare = kSide<T>;
  constexpr std::int64_t kBand = 2 * kSquare;
  const std::int64_t band_rows = rows / kBand * kBand;
  const std::int64_t square_cols = cols / kSquare * kSquare;
  for (std::int64_t r0 = 0; r0 < band_rows; r0 += kBand) {
    for (std::int64_t c0 = 0; c0 < square_cols; c0 += kSquare) {
      for (std::int64_t r = r0; r < r0 + kBand; r += kSquare) {
        transpose_square(source + r * source_stride + c0, source_stride, destination + c0 * destination_stride + r,
                         destination_stride);
      }
    }
  }
  transpose_in_tiles(source + band_rows * source_stride, source_stride, destination + band_rows, destination_stride,
                     rows - band_rows, cols);
  transpose_in_tiles(source + square_cols, source_stride, destination + square_cols * destination_stride,
                     destination_stride, band_rows, cols - square_cols);
}

bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}

#endif

}  // namespace

template <typename T>
void transpose(const T* source, std::int64_t source_stride, T* destination, std::int64_t destination_stride,
               std::int64_t rows, std::int64_t cols) {
#if RESURGO_TRANSPOSE_AVX2
  static const bool avx2 = has_avx2();
  if (avx2) {
    transpose_in_squares(source, source_stride, destination, destination_stride, rows, cols);
    return;
  }
#endif
  transpose_in_tiles(source, source_stride, destination, destination_stride, rows, cols);
}

template void transpose<float>(const float*, std::int64_t, float*, std::int64_t, std::int64_t, std::int64_t);
template void transpose<double>(const double*, std::int64_t, double*, std::int64_t, std::int64_t, std::int64_t);

}  // namespace resurgo
