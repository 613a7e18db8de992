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
  // end part way through a row (what read_global's slab exchange hands an
  // owner).
  void copy_in_at(std::uint64_t offset, const T* in, std::uint64_t count) const {
    walk(
        offset, count,
        [&](std::uint64_t row, std::uint64_t rows, std::uint64_t done) {
          copy_in(signed_of(row), signed_of(rows), in + done);
        },
        [&](std::uint64_t row, std::uint64_t col, std::uint64_t n, std::uint64_t done) {
          transpose<T>(in + done, signed_of(n), at(row, col), lld, 1, signed_of(n));
        });
  }
  // The inverse: such a stretch out of the local array into `out` (what
  // write_global's slab exchange sends a holder).
  void copy_out_at(std::uint64_t offset, std::uint64_t count, T* out) const {
    walk(
        offset, count,
        [&](std::uint64_t row, std::uint64_t rows, std::uint64_t done) {
          copy_out(signed_of(row), signed_of(rows), out + done);
        },
        [&](std::uint64_t row, std::uint64_t col, std::uint64_t n, std::uint64_t done) {
          transpose<T>(at(row, col), lld, out + done, 1, signed_of(n), 1);
        });
  }

 private:
  static std::int64_t signed_of(std::uint64_t n) { return static_cast<std::int64_t>(n); }
  T* at(std::uint64_t row, std::uint64_t col) const { return storage + col * static_cast<std::uint64_t>(lld) + row; }

  // Walks `count` elements of the rows in row-major order from element
  // `offset` on, `done` of them before each step: whole(row, rows, done)
  // for a run of whole rows, part(row, col, n, done) for n elements of one
  // row from column col on.
  template <typename Whole, typename Part>
  void walk(std::uint64_t offset, std::uint64_t count, Whole whole, Part part) const {
    const auto width = static_cast<std::uint64_t>(cols);
    std::uint64_t row = width == 0 ? 0 : offset / width;
    std::uint64_t col = width == 0 ? 0 : offset % width;
    for (std::uint64_t done = 0; done < count;) {
      const std::uint64_t whole_rows = col == 0 ? (count - done) / width : 0;
      const std::uint64_t n = whole_rows > 0 ? whole_rows * width : std::min(count - done, width - col);
      if (whole_rows > 0) {
        whole(row, whole_rows, done);
      } else {
        part(row, col, n, done);
      }
      done += n;
      row += (col + n) / width;
      col = (col + n) % width;
    }
  }
};

}  // namespace resurgo
