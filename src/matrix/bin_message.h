// The message of one bin (messages backend), as the owner applies it.
// 8-byte words, counted as MPI_UINT64_T so that MPI's int count reaches
// 16 GiB:
//   word 0      kBinMagic, with bit 0 set for an upper-triangle-only bin
//   word 1, 2   r rows, c columns
//   r words     the rows' global indices, then c words: the columns'
//   r * c       values of T, row-major, zero-padded to a whole word
// Global indices let the owner test row <= col for a symmetric update and
// find each element's place with its own layout arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "matrix/block_cyclic.h"
#include "matrix/update_bins.h"

namespace resurgo {

// Words of a bin of rows x cols values of `value_bytes` each.
std::size_t bin_words(std::size_t rows, std::size_t cols, std::size_t value_bytes);

// The bin of update's rows at `row_positions` times its columns at
// `col_positions`.
template <typename T>
std::vector<std::uint64_t> encode_bin(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                                      std::span<const std::size_t> col_positions);

// Adds the bin into `storage`, rank `rank`'s local array. Throws StateError
// for a message that is not a whole bin of elements this rank owns (never
// expected: a guard against writing outside the array).
template <typename T>
void apply_bin(std::span<const std::uint64_t> message, const BlockCyclic& layout, int rank, T* storage);

}  // namespace resurgo
