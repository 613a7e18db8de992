#include "matrix/part_checksums.h"

#include <bit>

namespace resurgo {

namespace {

// SplitMix64's finalizer over the index and the bits: every input bit
// reaches every output bit.
std::uint64_t mix_position(std::uint64_t index, std::uint64_t bits) {
  std::uint64_t x = bits + index * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
std::uint64_t bits_of(T value) {
  if constexpr (sizeof(T) == 4) {
    return std::bit_cast<std::uint32_t>(value);
  } else {
    return std::bit_cast<std::uint64_t>(value);
  }
}

}  // namespace

template <typename T>
std::vector<std::uint64_t> local_part_sums(const BlockCyclic& layout, int rank, const T* storage, MatrixOrder order,
                                           std::uint64_t part_elements, std::uint64_t parts) {
  std::vector<std::uint64_t> sums(parts, 0);
  const int grid_row = layout.grid_row_of(rank);
  const int grid_col = layout.grid_col_of(rank);
  const std::int64_t local_rows = layout.rows().local_extent(grid_row);
  const std::int64_t local_cols = layout.cols().local_extent(grid_col);
  const std::int64_t lld = layout.leading_dimension(grid_row);
  const auto shift = static_cast<unsigned>(std::countr_zero(part_elements));
  // File index = row * row_stride + col * col_stride.
  const bool row_major = order == MatrixOrder::kRowMajor;
  const auto row_stride = static_cast<std::uint64_t>(row_major ? layout.layout().cols : 1);
  const auto col_stride = static_cast<std::uint64_t>(row_major ? 1 : layout.layout().rows);
  std::vector<std::uint64_t> row_offsets(static_cast<std::size_t>(local_rows));
  for (std::int64_t i = 0; i < local_rows; ++i) {
    row_offsets[static_cast<std::size_t>(i)] =
        static_cast<std::uint64_t>(layout.rows().global_index(i, grid_row)) * row_stride;
  }
  for (std::int64_t j = 0; j < local_cols; ++j) {
    const std::uint64_t col_offset = static_cast<std::uint64_t>(layout.cols().global_index(j, grid_col)) * col_stride;
    const T* column = storage + j * lld;
    // Consecutive elements mostly share a part: add in a register, store
    // when the part changes (a sum in memory would chain every addition
    // through a store and a load).
    std::uint64_t part = row_offsets.empty() ? 0 : (row_offsets[0] + col_offset) >> shift;
    std::uint64_t sum = 0;
    for (std::int64_t i = 0; i < local_rows; ++i) {
      const std::uint64_t index = row_offsets[static_cast<std::size_t>(i)] + col_offset;
      if (index >> shift != part) {
        sums[part] += sum;
        part = index >> shift;
        sum = 0;
      }
      sum += mix_position(index, bits_of(column[i]));
    }
    if (!row_offsets.empty()) sums[part] += sum;
  }
  return sums;
}

template std::vector<std::uint64_t> local_part_sums<float>(const BlockCyclic&, int, const float*, MatrixOrder,
                                                           std::uint64_t, std::uint64_t);
template std::vector<std::uint64_t> local_part_sums<double>(const BlockCyclic&, int, const double*, MatrixOrder,
                                                            std::uint64_t, std::uint64_t);

}  // namespace resurgo
