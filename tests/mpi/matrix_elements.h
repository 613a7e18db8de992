// A rank's elements of a ConvergentMatrix by their global indices, worked
// out here from the block-cyclic rule, independently of the library (the
// MPI checks of the matrix compare what it holds with values of the global
// indices).
#pragma once

#include <cstdint>
#include <functional>

#include "resurgo/matrix.hpp"

namespace resurgo::mpi_checks {

// The global index of local index `local` on `process` of an axis.
inline std::int64_t global_index(std::int64_t local, std::int64_t block, int process, int processes) {
  return local / block * block * processes + process * block + local % block;
}

// Calls `visit(row, col, element)` for each element of this rank's part.
template <typename T>
void for_each_local(ConvergentMatrix<T>& matrix, const std::function<void(std::int64_t, std::int64_t, T&)>& visit) {
  const MatrixLayout& layout = matrix.layout();
  for (std::int64_t col = 0; col < matrix.local_cols(); ++col) {
    for (std::int64_t row = 0; row < matrix.local_rows(); ++row) {
      visit(global_index(row, layout.row_block, matrix.grid_row(), layout.grid_rows),
            global_index(col, layout.col_block, matrix.grid_col(), layout.grid_cols),
            matrix.local_data()[col * matrix.leading_dimension() + row]);
    }
  }
}

}  // namespace resurgo::mpi_checks
