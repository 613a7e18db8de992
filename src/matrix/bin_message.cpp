#include "matrix/bin_message.h"

#include <cstring>
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

}  // namespace

std::size_t bin_words(std::size_t rows, std::size_t cols, std::size_t value_bytes) {
  return kHeaderWords + rows + cols + (rows * cols * value_bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
}

template <typename T>
std::vector<std::uint64_t> encode_bin(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                                      std::span<const std::size_t> col_positions) {
  const std::size_t rows = row_positions.size();
  const std::size_t cols = col_positions.size();
  std::vector<std::uint64_t> message(bin_words(rows, cols, sizeof(T)), 0);
  message[0] = kBinMagic | (update.upper_only ? kUpperOnly : 0);
  message[1] = rows;
  message[2] = cols;
  std::uint64_t* indices = message.data() + kHeaderWords;
  for (const std::size_t position : row_positions) *indices++ = static_cast<std::uint64_t>(update.rows[position]);
  for (const std::size_t position : col_positions) *indices++ = static_cast<std::uint64_t>(update.cols[position]);
  auto* values = reinterpret_cast<std::byte*>(indices);
  const std::size_t stride = update.cols.size();
  for (const std::size_t row : row_positions) {
    for (const std::size_t col : col_positions) {
      std::memcpy(values, &update.values[row * stride + col], sizeof(T));
      values += sizeof(T);
    }
  }
  return message;
}

template <typename T>
void apply_bin(std::span<const std::uint64_t> message, const BlockCyclic& layout, int rank, T* storage) {
  if (message.size() < kHeaderWords || (message[0] & ~kUpperOnly) != kBinMagic) refuse("no bin header");
  const bool upper_only = (message[0] & kUpperOnly) != 0;
  const std::uint64_t rows = message[1];
  const std::uint64_t cols = message[2];
  // Bounded before bin_words multiplies them.
  const bool fits = cols == 0 || rows <= message.size() * sizeof(std::uint64_t) / sizeof(T) / cols;
  if (!fits || rows + cols > message.size() || bin_words(rows, cols, sizeof(T)) != message.size()) {
    refuse(std::to_string(rows) + " x " + std::to_string(cols) + " values do not fill " +
           std::to_string(message.size()) + " words");
  }
  const auto row_indices = message.subspan(kHeaderWords, rows);
  const auto col_indices = message.subspan(kHeaderWords + rows, cols);
  const int grid_row = layout.grid_row_of(rank);
  const std::vector<std::int64_t> local_rows = local_indices(row_indices, layout.rows(), grid_row);
  std::vector<std::int64_t> col_offsets = local_indices(col_indices, layout.cols(), layout.grid_col_of(rank));
  const std::int64_t lld = layout.leading_dimension(grid_row);
  for (std::int64_t& offset : col_offsets) offset *= lld;

  const auto* values = reinterpret_cast<const std::byte*>(message.data() + kHeaderWords + rows + cols);
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j, values += sizeof(T)) {
      if (upper_only && row_indices[i] > col_indices[j]) continue;
      T value;
      std::memcpy(&value, values, sizeof(T));
      storage[col_offsets[j] + local_rows[i]] += value;
    }
  }
}

template std::vector<std::uint64_t> encode_bin(const UpdateSlice<float>&, std::span<const std::size_t>,
                                               std::span<const std::size_t>);
template std::vector<std::uint64_t> encode_bin(const UpdateSlice<double>&, std::span<const std::size_t>,
                                               std::span<const std::size_t>);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, float*);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, double*);

}  // namespace resurgo
