// Transposing copies of blocks of matrix elements: between a rank's
// column-major local array and the row-major lines of a global-layout file
// (local_rows.h). In AVX2 registers where the processor has them, 8 x 8
// floats or 4 x 4 doubles at a time: element by element in cache tiles,
// the copies took 8 to 10 times as long as a memcpy of the same bytes on
// this project's development VM, in registers 2.7 times
// (bench/results/matrix_kernels.md).
#pragma once

#include <cstdint>

namespace resurgo {

// destination[c * destination_stride + r] = source[r * source_stride + c]
// for r in [0, rows), c in [0, cols). The two blocks do not overlap.
template <typename T>
void transpose(const T* source, std::int64_t source_stride, T* destination, std::int64_t destination_stride,
               std::int64_t rows, std::int64_t cols);

}  // namespace resurgo
