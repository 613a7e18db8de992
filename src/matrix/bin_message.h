// The message of one bin (messages backend), as the owner applies it.
// 8-byte words, counted as MPI_UINT64_T so that MPI's int count reaches
// 16 GiB:
//   word 0      kBinMagic, with bit 0 set for an upper-triangle-only bin
//   word 1, 2   r rows, c columns
//   r words     the rows' global indices, then c words: the columns'
//   values      of T, row-major over the r x c pairs, zero-padded to a whole
//               word: all r * c of them, or, in an upper-only bin, only the
//               pairs with row <= col
// Global indices let the owner find each element's place with its own
// layout arithmetic, and tell which pairs of an upper-only bin carry a
// value: it walks the pairs in the same order and skips the same ones, so a
// symmetric update sends one triangle and is added exactly as the full
// square with its lower pairs skipped would be.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "matrix/block_cyclic.h"
#include "matrix/update_bins.h"

namespace resurgo {

// Words of a bin of `indices` row and column indices and `values` values of
// `value_bytes` each.
std::size_t bin_words(std::size_t indices, std::size_t values, std::size_t value_bytes);

struct EncodedBin {
  std::vector<std::uint64_t> words;
  std::uint64_t values = 0;  // the elements it adds
};

// The bin of update's rows at `row_positions` times its columns at
// `col_positions`, packed into `room` (a recycled buffer; its contents are
// overwritten). An upper-only bin leaves out the values below the
// diagonal, and the rows and columns left with none.
template <typename T>
EncodedBin encode_bin(const UpdateSlice<T>& update, std::span<const std::size_t> row_positions,
                      std::span<const std::size_t> col_positions, std::vector<std::uint64_t> room = {});

// Adds the bin into `storage`, rank `rank`'s local array: each element's
// values in the order of the pairs; column by column down the local array
// where that keeps the order (distinct rows or distinct columns, as a
// Hessian update's are), else row by row. Throws StateError,
// before adding anything, for a message that is not a whole bin of
// elements this rank owns (never expected: a guard against writing outside
// the array).
template <typename T>
void apply_bin(std::span<const std::uint64_t> message, const BlockCyclic& layout, int rank, T* storage);

}  // namespace resurgo
