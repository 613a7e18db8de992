// Rows of a rank's column-major local array (ScaLAPACK's: leading
// dimension lld) to and from row-major order, for row-major global-layout
// files (matrix_io.cpp). A stretch of rows at a time, so that a file is
// written or read through a buffer of a few MiB rather than a row-major
// copy of the whole part.
#pragma once

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
};

}  // namespace resurgo
