#include "matrix/bin_message.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr std::uint64_t kBinMagic = 0x5253474d42494e00;  // "RSGMBIN\0"
constexpr std::uint64_t kUpperOnly = 1;
constexpr std::size_t kHeaderWords = 3;

[[noreturn]] void refuse(const std::string& why) {
  throw StateError("ConvergentMatrix: a received bin is damaged (" + why +
                   "); it was not applied: another program may be sending on the matrix's communicator");
}

// The local index of each of a bin's indices, checking that `process` owns it.
std::vector<std::int64_t> local_indices(std::span<const std::uint64_t> global, const CyclicAxis& axis, int process) {
  std::vector<std::int64_t> local(global.size());
  for (std::size_t i = 0; i < global.size(); ++i) {
    const auto index = static_cast<std::int64_t>(global[i]);
    if (index < 0 || index >= axis.extent || axis.owner(index) != process) {
      refuse("index " + std::to_string(index) + " is not one of this rank's");
    }
    local[i] = axis.local_index(index);
  }
  return local;
}

// The values a bin of these rows and columns carries: every pair, or the
// pairs with row <= col. Counted through the sorted columns, so that a
// damaged header cannot make the count take rows x columns steps; the
// maximum stands for a product that does not fit.
std::uint64_t carried_values(std::span<const std::uint64_t> rows, std::span<const std::uint64_t> cols,
                             bool upper_only) {
  if (!upper_only) {
    const bool fits = cols.empty() || rows.size() <= std::numeric_limits<std::uint64_t>::max() / cols.size();
    return fits ? rows.size() * cols.size() : std::numeric_limits<std::uint64_t>::max();
  }
  std::vector<std::uint64_t> sorted(cols.begin(), cols.end());
  std::sort(sorted.begin(), sorted.end());
  std::uint64_t pairs = 0;
  for (const std::uint64_t row : rows) {
    pairs += static_cast<std::uint64_t>(sorted.end() - std::lower_bound(sorted.begin(), sorted.end(), row));
  }
  return pairs;
}

// The positions of the rows and columns a bin lists. An upper-only bin
// drops the rows below its last column and the columns before its first
// row: they would pair with nothing.
struct ListedPositions {
  std::vector<std::size_t> rows;
  std::vector<std::size_t> cols;
};

template <typename T>
ListedPositions listed_positions(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                                 std::span<const std::size_t> col_positions) {
  ListedPositions listed{{row_positions.begin(), row_positions.end()}, {col_positions.begin(), col_positions.end()}};
  if (!update.upper_only || listed.rows.empty() || listed.cols.empty()) return listed;
  std::int64_t first_row = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_col = std::numeric_limits<std::int64_t>::min();
  for (const std::size_t position : listed.rows) first_row = std::min(first_row, update.rows[position]);
  for (const std::size_t position : listed.cols) last_col = std::max(last_col, update.cols[position]);
  std::erase_if(listed.rows, [&](std::size_t position) { return update.rows[position] > last_col; });
  std::erase_if(listed.cols, [&](std::size_t position) { return update.cols[position] < first_row; });
  return listed;
}

}  // namespace

std::size_t bin_words(std::size_t indices, std::size_t values, std::size_t value_bytes) {
  return kHeaderWords + indices + (values * value_bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
}

template <typename T>
EncodedBin encode_bin(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                      std::span<const std::size_t> col_positions) {
  const ListedPositions listed = listed_positions(update, row_positions, col_positions);
  const std::size_t rows = listed.rows.size();
  std::vector<std::uint64_t> indices;
  indices.reserve(rows + listed.cols.size());
  for (const std::size_t position : listed.rows) indices.push_back(static_cast<std::uint64_t>(update.rows[position]));
  for (const std::size_t position : listed.cols) indices.push_back(static_cast<std::uint64_t>(update.cols[position]));
  const std::span<const std::uint64_t> listed_indices(indices);
  EncodedBin bin;
  bin.values = carried_values(listed_indices.first(rows), listed_indices.subspan(rows), update.upper_only);
  bin.words.assign(bin_words(indices.size(), bin.values, sizeof(T)), 0);
  bin.words[0] = kBinMagic | (update.upper_only ? kUpperOnly : 0);
  bin.words[1] = rows;
  bin.words[2] = listed.cols.size();
  std::copy(indices.begin(), indices.end(), bin.words.begin() + kHeaderWords);
  auto* values = reinterpret_cast<std::byte*>(bin.words.data() + kHeaderWords + indices.size());
  const std::size_t stride = update.cols.size();
  for (const std::size_t row : listed.rows) {
    for (const std::size_t col : listed.cols) {
      if (update.upper_only && update.rows[row] > update.cols[col]) continue;
      std::memcpy(values, &update.values[row * stride + col], sizeof(T));
      values += sizeof(T);
    }
  }
  return bin;
}

template <typename T>
void apply_bin(std::span<const std::uint64_t> message, const BlockCyclic& layout, int rank, T* storage) {
  if (message.size() < kHeaderWords || (message[0] & ~kUpperOnly) != kBinMagic) refuse("no bin header");
  const bool upper_only = (message[0] & kUpperOnly) != 0;
  const std::uint64_t rows = message[1];
  const std::uint64_t cols = message[2];
  const std::size_t index_words = message.size() - kHeaderWords;
  if (rows > index_words || cols > index_words - rows) {
    refuse(std::to_string(rows) + " rows and " + std::to_string(cols) + " columns in " +
           std::to_string(message.size()) + " words");
  }
  const auto row_indices = message.subspan(kHeaderWords, rows);
  const auto col_indices = message.subspan(kHeaderWords + rows, cols);
  // Bounded before bin_words multiplies it.
  const std::uint64_t values = carried_values(row_indices, col_indices, upper_only);
  if (values > message.size() * sizeof(std::uint64_t) / sizeof(T) ||
      bin_words(rows + cols, values, sizeof(T)) != message.size()) {
    refuse(std::to_string(values) + " values of " + std::to_string(rows) + " x " + std::to_string(cols) +
           (upper_only ? " upper-triangle" : "") + " pairs do not fill " + std::to_string(message.size()) + " words");
  }
  const int grid_row = layout.grid_row_of(rank);
  const std::vector<std::int64_t> local_rows = local_indices(row_indices, layout.rows(), grid_row);
  std::vector<std::int64_t> col_offsets = local_indices(col_indices, layout.cols(), layout.grid_col_of(rank));
  const std::int64_t lld = layout.leading_dimension(grid_row);
  for (std::int64_t& offset : col_offsets) offset *= lld;

  const auto* value = reinterpret_cast<const std::byte*>(message.data() + kHeaderWords + rows + cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      if (upper_only && row_indices[i] > col_indices[j]) continue;
      T addend;
      std::memcpy(&addend, value, sizeof(T));
      value += sizeof(T);
      storage[col_offsets[j] + local_rows[i]] += addend;
    }
  }
}

template EncodedBin encode_bin(const UpdateSlice<float>&, std::span<const std::size_t>, std::span<const std::size_t>);
template EncodedBin encode_bin(const UpdateSlice<double>&, std::span<const std::size_t>, std::span<const std::size_t>);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, float*);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, double*);

}  // namespace resurgo
