#include "matrix/update_bins.h"

#include <algorithm>
#include <limits>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

void check_indices(std::string_view call, std::string_view name, std::span<const std::int64_t> indices,
                   std::int64_t bound) {
  for (std::size_t position = 0; position < indices.size(); ++position) {
    const std::int64_t index = indices[position];
    if (index >= 0 && index < bound) continue;
    throw InvalidArgumentError(std::string(call) + ": " + std::string(name) + "[" + std::to_string(position) +
                               "] = " + std::to_string(index) + " is out of range [0, " + std::to_string(bound) +
                               "): nothing of this update was applied");
  }
}

void check_value_count(std::string_view call, std::size_t values, std::size_t rows, std::size_t cols) {
  const bool overflows = cols != 0 && rows > std::numeric_limits<std::size_t>::max() / cols;
  if (!overflows && values == rows * cols) return;
  throw InvalidArgumentError(std::string(call) + ": " + std::to_string(values) + " values for " + std::to_string(rows) +
                             " rows x " + std::to_string(cols) +
                             " columns (one value per pair, row-major, is needed): nothing of this update was applied");
}

OwnerGroups::OwnerGroups(std::span<const std::int64_t> indices, const CyclicAxis& axis)
    : positions_(indices.size()),
      starts_(static_cast<std::size_t>(axis.processes) + 1, 0),
      smallest_(static_cast<std::size_t>(axis.processes), std::numeric_limits<std::int64_t>::max()),
      largest_(static_cast<std::size_t>(axis.processes), std::numeric_limits<std::int64_t>::min()) {
  for (const std::int64_t index : indices) {
    const auto owner = static_cast<std::size_t>(axis.owner(index));
    ++starts_[owner + 1];
    smallest_[owner] = std::min(smallest_[owner], index);
    largest_[owner] = std::max(largest_[owner], index);
  }
  for (std::size_t group = 1; group < starts_.size(); ++group) starts_[group] += starts_[group - 1];
  std::vector<std::size_t> next(starts_.begin(), starts_.end() - 1);
  for (std::size_t position = 0; position < indices.size(); ++position) {
    positions_[next[static_cast<std::size_t>(axis.owner(indices[position]))]++] = position;
  }
}

std::span<const std::size_t> OwnerGroups::group(int process) const {
  const auto first = starts_[static_cast<std::size_t>(process)];
  const auto last = starts_[static_cast<std::size_t>(process) + 1];
  return std::span<const std::size_t>(positions_).subspan(first, last - first);
}

UpdateBins::UpdateBins(const BlockCyclic& layout, std::span<const std::int64_t> rows,
                       std::span<const std::int64_t> cols, bool upper_only)
    : layout_(layout), rows_(rows, layout.rows()), cols_(cols, layout.cols()) {
  for (int grid_row = 0; grid_row < layout.layout().grid_rows; ++grid_row) {
    if (rows_.group(grid_row).empty()) continue;
    for (int grid_col = 0; grid_col < layout.layout().grid_cols; ++grid_col) {
      if (cols_.group(grid_col).empty()) continue;
      if (upper_only && rows_.smallest(grid_row) > cols_.largest(grid_col)) continue;
      targets_.push_back(layout.rank_of(grid_row, grid_col));
    }
  }
}

}  // namespace resurgo
