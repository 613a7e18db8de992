// Rows of a rank's column-major local array (ScaLAPACK's: leading
// dimension lld) to and from row-major order, for row-major global-layout
// files (matrix_io.cpp). A stretch of rows at a time, so that a file is
// written or read through a buffer of a few MiB rather than a row-major
// copy of the whole part; in 16 x 16 tiles, so that both sides stay in
// cache.
#pragma once

#include <algorithm>
#include <cstdint>

namespace resurgo {

template <typename T>
struct LocalRows {
  T* storage;
  std::int64_t lld;
  std::int64_t cols;

  // Local rows [first, first + count) into `out`, row after row.
  void copy_out(std::int64_t first, std::int64_t count, T* out) const {
    in_tiles<false>(first, count,
                    [&](std::int64_t i, std::int64_t j, std::int64_t at) { out[at] = storage[j * lld + i]; });
  }
  // The inverse: `in`, row after row, into local rows [first, first + count).
  void copy_in(std::int64_t first, std::int64_t count, const T* in) const {
    in_tiles<true>(first, count,
                   [&](std::int64_t i, std::int64_t j, std::int64_t at) { storage[j * lld + i] = in[at]; });
  }

 private:
  // visit(local row, local column, index in the row-major rows) for every
  // element of the rows, tile by tile; the inner loop runs along the side
  // written (down the local array's columns when `down_columns`, along the
  // rows otherwise): stores that run along memory cost less than loads that
  // do.
  template <bool down_columns, typename Visit>
  void in_tiles(std::int64_t first, std::int64_t count, const Visit& visit) const {
    constexpr std::int64_t kTile = 16;
    for (std::int64_t i0 = first; i0 < first + count; i0 += kTile) {
      const std::int64_t i_end = std::min(first + count, i0 + kTile);
      for (std::int64_t j0 = 0; j0 < cols; j0 += kTile) {
        const std::int64_t j_end = std::min(cols, j0 + kTile);
        if constexpr (down_columns) {
          for (std::int64_t j = j0; j < j_end; ++j) {
            for (std::int64_t i = i0; i < i_end; ++i) visit(i, j, (i - first) * cols + j);
          }
        } else {
          for (std::int64_t i = i0; i < i_end; ++i) {
            for (std::int64_t j = j0; j < j_end; ++j) visit(i, j, (i - first) * cols + j);
          }
        }
      }
    }
  }
};

}  // namespace resurgo
