#include "matrix/block_cyclic.h"

#include <algorithm>

namespace resurgo {

std::int64_t numroc(std::int64_t extent, std::int64_t block, int process, int source, int processes) {
  const int distance = (processes + process - source) % processes;
  const std::int64_t whole_blocks = extent / block;
  std::int64_t count = whole_blocks / processes * block;
  const std::int64_t extra_blocks = whole_blocks % processes;
  if (distance < extra_blocks) {
    count += block;
  } else if (distance == extra_blocks) {
    count += extent % block;  // the last, partial block
  }
  return count;
}

BlockCyclic::BlockCyclic(const MatrixLayout& layout)
    : layout_(layout),
      rows_{layout.rows, layout.row_block, layout.grid_rows},
      cols_{layout.cols, layout.col_block, layout.grid_cols} {}

std::int64_t BlockCyclic::leading_dimension(int grid_row) const {
  return std::max<std::int64_t>(1, rows_.local_extent(grid_row));
}

std::int64_t BlockCyclic::storage_elements(int rank) const {
  return std::max<std::int64_t>(1, cols_.local_extent(grid_col_of(rank)) * leading_dimension(grid_row_of(rank)));
}

std::int64_t BlockCyclic::local_offset(std::int64_t row, std::int64_t col) const {
  return cols_.local_index(col) * leading_dimension(rows_.owner(row)) + rows_.local_index(row);
}

}  // namespace resurgo
