// Rows of a rank's column-major local array (ScaLAPACK's: leading
// dimension lld) to and from row-major order, for row-major global-layout
// files (matrix_io.cpp). A stretch of rows at a time, so that a file is
// written or read through a buffer of a few MiB rather than a row-major
// copy of the whole part.
#pragma once

#include <algorithm>
#include <cstdint>

#include "matrix/transpose.h"

namespace resurgo {

template <typename T>
struct LocalRows {
  T* storage;
  std::int64_t lld;
  std::int64_t cols;

  // Local rows [first, first + count) into `out`, row after row: the local
  // array's columns, from row `first` on, are the lines transposed.
  void copy_out(std::int64_t first, std::int64_t count, T* out) const {
    transpose<T>(storage + first, lld, out, cols, cols, count);
  }
  // The inverse: `in`, row after row, into local rows [first, first + count).
  void copy_in(std::int64_t first, std::int64_t count, const T* in) const {
    transpose<T>(in, cols, storage + first, lld, count, cols);
  }
  // `count` elements of the rows in row-major order, from element `offset`
  // of that order on, into the local array: a stretch that may start and
  // end part way through a row.
  void copy_in_at(std::uint64_t offset, const T* in, std::uint64_t count) const {
    const auto width = static_cast<std::uint64_t>(cols);
    std::uint64_t row = width == 0 ? 0 : offset / width;
    std::uint64_t col = width == 0 ? 0 : offset % width;
    while (count > 0) {
      const std::uint64_t whole_rows = col == 0 ? count / width : 0;
      const std::uint64_t n = whole_rows > 0 ? whole_rows * width : std::min(count, width - col);
      if (whole_rows > 0) {
        copy_in(static_cast<std::int64_t>(row), static_cast<std::int64_t>(whole_rows), in);
      } else {
        transpose<T>(in, static_cast<std::int64_t>(n), storage + col * lld + row, lld, 1, static_cast<std::int64_t>(n));
      }
      in += n;
      count -= n;
      row += (col + n) / width;
      col = (col + n) % width;
    }
  }
};

}  // namespace resurgo
