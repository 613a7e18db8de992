// An update A[rows, cols] += values checked and binned by owner. Because an
// update is the slice rows x cols, the elements one process owns form the
// dense sub-block of the rows its grid row owns and the columns its grid
// column owns: binning groups the row indices by grid row and the column
// indices by grid column (two counting sorts, linear in rows + cols), and
// each target's bin is the product of one group of each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "matrix/block_cyclic.h"

namespace resurgo {

// An update as the caller gave it: values are rows.size() x cols.size(),
// row-major. `upper_only`: add only the elements with row <= col (a
// symmetric update).
template <typename T>
struct UpdateSlice {
  std::span<const T> values;
  std::span<const std::int64_t> rows;
  std::span<const std::int64_t> cols;
  bool upper_only = false;
};

// InvalidArgumentError naming the first of `indices` outside [0, bound):
// "<call>: <name>[17] = 5000 is out of range [0, 4096): ...".
void check_indices(std::string_view call, std::string_view name, std::span<const std::int64_t> indices,
                   std::int64_t bound);
// InvalidArgumentError unless there is one value per (row, col) pair.
void check_value_count(std::string_view call, std::size_t values, std::size_t rows, std::size_t cols);

// The positions of an index array grouped by the process (of one grid axis)
// owning each index, in their original order inside a group.
class OwnerGroups {
 public:
  OwnerGroups(std::span<const std::int64_t> indices, const CyclicAxis& axis);

  std::span<const std::size_t> group(int process) const;
  // The smallest and largest index of a non-empty group.
  std::int64_t smallest(int process) const { return smallest_[static_cast<std::size_t>(process)]; }
  std::int64_t largest(int process) const { return largest_[static_cast<std::size_t>(process)]; }

 private:
  std::vector<std::size_t> positions_;
  std::vector<std::size_t> starts_;  // group g is positions_[starts_[g], starts_[g + 1])
  std::vector<std::int64_t> smallest_;
  std::vector<std::int64_t> largest_;
};

// Each target rank's bin: the update's rows its grid row owns times the
// columns its grid column owns.
class UpdateBins {
 public:
  UpdateBins(const BlockCyclic& layout, std::span<const std::int64_t> rows, std::span<const std::int64_t> cols,
             bool upper_only);

  // Ranks whose bin has an element to add, ascending. With upper_only, a
  // bin whose every row lies below every column's diagonal is left out.
  const std::vector<int>& targets() const { return targets_; }
  std::span<const std::size_t> rows_of(int rank) const { return rows_.group(layout_.grid_row_of(rank)); }
  std::span<const std::size_t> cols_of(int rank) const { return cols_.group(layout_.grid_col_of(rank)); }

 private:
  const BlockCyclic& layout_;
  OwnerGroups rows_;
  OwnerGroups cols_;
  std::vector<int> targets_;
};

}  // namespace resurgo
