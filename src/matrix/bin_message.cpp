#include "matrix/bin_message.h"

#include <algorithm>
#include <cstring>
#include <functional>
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

// Copies the bin's values into `out`, row by row in the order of the
// listed pairs, an upper-only bin's pairs below the diagonal skipped. With
// ascending columns a row's pairs are a run from its first column >= the
// row on: found once per row instead of tested per pair.
template <typename T>
void pack_values(const UpdateSlice<T>& update, const ListedPositions& listed,
                 std::span<const std::uint64_t> col_indices, std::byte* out) {
  const std::size_t stride = update.cols.size();
  const bool runs = update.upper_only && std::is_sorted(col_indices.begin(), col_indices.end());
  const bool test_each = update.upper_only && !runs;
  for (const std::size_t row : listed.rows) {
    const T* source = update.values.data() + row * stride;
    const auto index = static_cast<std::uint64_t>(update.rows[row]);
    const std::size_t first =
        runs ? static_cast<std::size_t>(std::lower_bound(col_indices.begin(), col_indices.end(), index) -
                                        col_indices.begin())
             : 0;
    for (std::size_t k = first; k < listed.cols.size(); ++k) {
      if (test_each && index > col_indices[k]) continue;
      std::memcpy(out, source + listed.cols[k], sizeof(T));
      out += sizeof(T);
    }
  }
}

}  // namespace

std::size_t bin_words(std::size_t indices, std::size_t values, std::size_t value_bytes) {
  return kHeaderWords + indices + (values * value_bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);
}

template <typename T>
EncodedBin encode_bin(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                      std::span<const std::size_t> col_positions, std::vector<std::uint64_t> room) {
  const ListedPositions listed = listed_positions(update, row_positions, col_positions);
  const std::size_t rows = listed.rows.size();
  std::vector<std::uint64_t> indices;
  indices.reserve(rows + listed.cols.size());
  for (const std::size_t position : listed.rows) indices.push_back(static_cast<std::uint64_t>(update.rows[position]));
  for (const std::size_t position : listed.cols) indices.push_back(static_cast<std::uint64_t>(update.cols[position]));
  const std::span<const std::uint64_t> listed_indices(indices);
  EncodedBin bin{std::move(room)};
  bin.values = carried_values(listed_indices.first(rows), listed_indices.subspan(rows), update.upper_only);
  bin.words.assign(bin_words(indices.size(), bin.values, sizeof(T)), 0);
  bin.words[0] = kBinMagic | (update.upper_only ? kUpperOnly : 0);
  bin.words[1] = rows;
  bin.words[2] = listed.cols.size();
  std::copy(indices.begin(), indices.end(), bin.words.begin() + kHeaderWords);
  pack_values(update, listed, listed_indices.subspan(rows),
              reinterpret_cast<std::byte*>(bin.words.data() + kHeaderWords + indices.size()));
  return bin;
}

namespace {

// A checked bin: its indices, and where its values start.
struct BinView {
  bool upper_only = false;
  std::span<const std::uint64_t> rows;
  std::span<const std::uint64_t> cols;
  const std::byte* values = nullptr;
};

template <typename T>
BinView check_bin(std::span<const std::uint64_t> message) {
  if (message.size() < kHeaderWords || (message[0] & ~kUpperOnly) != kBinMagic) refuse("no bin header");
  const bool upper_only = (message[0] & kUpperOnly) != 0;
  const std::uint64_t rows = message[1];
  const std::uint64_t cols = message[2];
  const std::size_t index_words = message.size() - kHeaderWords;
  if (rows > index_words || cols > index_words - rows) {
    refuse(std::to_string(rows) + " rows and " + std::to_string(cols) + " columns in " +
           std::to_string(message.size()) + " words");
  }
  const BinView bin{upper_only, message.subspan(kHeaderWords, rows), message.subspan(kHeaderWords + rows, cols),
                    reinterpret_cast<const std::byte*>(message.data() + kHeaderWords + rows + cols)};
  // Bounded before bin_words multiplies it.
  const std::uint64_t values = carried_values(bin.rows, bin.cols, upper_only);
  if (values > message.size() * sizeof(std::uint64_t) / sizeof(T) ||
      bin_words(rows + cols, values, sizeof(T)) != message.size()) {
    refuse(std::to_string(values) + " values of " + std::to_string(rows) + " x " + std::to_string(cols) +
           (upper_only ? " upper-triangle" : "") + " pairs do not fill " + std::to_string(message.size()) + " words");
  }
  return bin;
}

template <typename T>
T value_at(const std::byte* values, std::size_t index) {
  T value;
  std::memcpy(&value, values + index * sizeof(T), sizeof(T));
  return value;
}

// The bin's local rows and the offsets of its local columns in rank
// `rank`'s array, each index checked to be this rank's.
struct LocalPlaces {
  std::vector<std::int64_t> rows;
  std::vector<std::int64_t> col_offsets;
};

LocalPlaces local_places(const BinView& bin, const BlockCyclic& layout, int rank) {
  const int grid_row = layout.grid_row_of(rank);
  LocalPlaces places{local_indices(bin.rows, layout.rows(), grid_row),
                     local_indices(bin.cols, layout.cols(), layout.grid_col_of(rank))};
  const std::int64_t lld = layout.leading_dimension(grid_row);
  for (std::int64_t& offset : places.col_offsets) offset *= lld;
  return places;
}

// In the order of the pairs, row by row: each element's additions in the
// order the sender listed them, whatever the indices.
template <typename T>
void add_by_rows(const BinView& bin, const LocalPlaces& places, T* storage) {
  std::size_t next = 0;
  for (std::size_t i = 0; i < bin.rows.size(); ++i) {
    for (std::size_t j = 0; j < bin.cols.size(); ++j) {
      if (bin.upper_only && bin.rows[i] > bin.cols[j]) continue;
      storage[places.col_offsets[j] + places.rows[i]] += value_at<T>(bin.values, next++);
    }
  }
}

bool strictly_ascending(std::span<const std::uint64_t> indices) {
  return std::adjacent_find(indices.begin(), indices.end(), std::greater_equal<>()) == indices.end();
}

// Whether add_by_columns adds each element's values in the order of the
// pairs, and can find them: an element gets two values only from pairs
// sharing a row or a column when the rows or the columns are distinct, and
// an upper-only bin's rows start at a place found from sorted columns.
bool columns_keep_the_order(const BinView& bin) {
  if (bin.upper_only && !std::is_sorted(bin.cols.begin(), bin.cols.end())) return false;
  return strictly_ascending(bin.rows) || strictly_ascending(bin.cols);
}

// Column by column, down each column of the local array, which is laid out
// so: the additions walk memory forwards instead of jumping a column's
// length at every pair (a page, or a TLB miss, per element). Only where
// columns_keep_the_order. Row i's value for column j is values[base[i] + j]:
// an upper-only row carries the columns from the first one >= its index on.
template <typename T>
void add_by_columns(const BinView& bin, const LocalPlaces& places, T* storage) {
  const std::size_t cols = bin.cols.size();
  std::vector<std::ptrdiff_t> base(bin.rows.size());
  std::ptrdiff_t start = 0;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const std::ptrdiff_t first =
        bin.upper_only ? std::lower_bound(bin.cols.begin(), bin.cols.end(), bin.rows[i]) - bin.cols.begin() : 0;
    base[i] = start - first;
    start += static_cast<std::ptrdiff_t>(cols) - first;
  }
  const std::size_t rows = base.size();
  for (std::size_t j = 0; j < cols; ++j) {
    T* column = storage + places.col_offsets[j];
    for (std::size_t i = 0; i < rows; ++i) {
      if (bin.upper_only && bin.rows[i] > bin.cols[j]) continue;
      column[places.rows[i]] +=
          value_at<T>(bin.values, static_cast<std::size_t>(base[i] + static_cast<std::ptrdiff_t>(j)));
    }
  }
}

}  // namespace

template <typename T>
void apply_bin(std::span<const std::uint64_t> message, const BlockCyclic& layout, int rank, T* storage) {
  const BinView bin = check_bin<T>(message);
  const LocalPlaces places = local_places(bin, layout, rank);
  if (columns_keep_the_order(bin)) {
    add_by_columns(bin, places, storage);
  } else {
    add_by_rows(bin, places, storage);
  }
}

template EncodedBin encode_bin(const UpdateSlice<float>&, std::span<const std::size_t>, std::span<const std::size_t>,
                               std::vector<std::uint64_t>);
template EncodedBin encode_bin(const UpdateSlice<double>&, std::span<const std::size_t>, std::span<const std::size_t>,
                               std::vector<std::uint64_t>);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, float*);
template void apply_bin(std::span<const std::uint64_t>, const BlockCyclic&, int, double*);

}  // namespace resurgo
