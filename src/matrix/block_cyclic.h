// ScaLAPACK's 2-D block-cyclic distribution with the first block on process
// (0, 0): where a global element lives and where it sits in its owner's
// column-major local array. Pure arithmetic, so the binning on the sender and
// the applying on the owner agree by construction.
#pragma once

#include <cstdint>

#include "resurgo/matrix.hpp"

namespace resurgo {

// ScaLAPACK's NUMROC: how many of `extent` indices, dealt in blocks of
// `block` round-robin over `processes` starting at `source`, land on
// `process`.
std::int64_t numroc(std::int64_t extent, std::int64_t block, int process, int source, int processes);

// One axis of the distribution: rows over the grid's rows, or columns over
// its columns.
struct CyclicAxis {
  std::int64_t extent = 0;
  std::int64_t block = 1;
  int processes = 1;

  int owner(std::int64_t index) const { return static_cast<int>((index / block) % processes); }
  // The index's place on its owner: whole cycles passed, times the block,
  // plus the place inside the block.
  std::int64_t local_index(std::int64_t index) const { return index / (block * processes) * block + index % block; }
  // The inverse of local_index() on `process`.
  std::int64_t global_index(std::int64_t local, int process) const {
    return local / block * block * processes + process * block + local % block;
  }
  std::int64_t local_extent(int process) const { return numroc(extent, block, process, 0, processes); }
};

// The whole layout (grid filled in). Rank r is grid process (r / grid_cols,
// r % grid_cols), as Cblacs_gridinit(..., "Row", ...) numbers them.
class BlockCyclic {
 public:
  explicit BlockCyclic(const MatrixLayout& layout);

  const MatrixLayout& layout() const { return layout_; }
  const CyclicAxis& rows() const { return rows_; }
  const CyclicAxis& cols() const { return cols_; }

  int rank_of(int grid_row, int grid_col) const { return grid_row * layout_.grid_cols + grid_col; }
  int grid_row_of(int rank) const { return rank / layout_.grid_cols; }
  int grid_col_of(int rank) const { return rank % layout_.grid_cols; }
  int owner(std::int64_t row, std::int64_t col) const { return rank_of(rows_.owner(row), cols_.owner(col)); }

  // Leading dimension of the local arrays of grid row `grid_row`: never 0,
  // as ScaLAPACK requires even of a process that owns no row.
  std::int64_t leading_dimension(int grid_row) const;
  // Elements of rank `rank`'s local array (local columns x leading
  // dimension), and at least one, so that its pointer is valid even on a
  // rank that owns nothing.
  std::int64_t storage_elements(int rank) const;
  // Where (row, col) sits in its owner's local array.
  std::int64_t local_offset(std::int64_t row, std::int64_t col) const;

 private:
  MatrixLayout layout_;
  CyclicAxis rows_;
  CyclicAxis cols_;
};

}  // namespace resurgo
