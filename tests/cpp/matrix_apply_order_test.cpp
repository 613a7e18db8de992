// The owner's additions (src/matrix/bin_message.h): apply_bin walks a bin
// column by column down the local array where that keeps each element's
// additions in the order of the pairs, else row by row; either way every
// element ends bit-identical to adding the pairs one by one in order. And
// the buffers bins are packed into are recycled (src/matrix/send_queue.h).
// The matrix sources exist only in a build with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "matrix/bin_message.h"
#include "matrix/send_queue.h"
#include "matrix/update_bins.h"

namespace resurgo {
namespace {

// Values whose sums depend on the order of the additions: magnitudes from
// 2^-12 to 2^11, so that most sums round.
std::vector<float> order_sensitive_values(std::size_t count, float scale) {
  std::vector<float> values(count);
  for (std::size_t k = 0; k < count; ++k) {
    values[k] = std::ldexp(scale + 0.1f * static_cast<float>(k % 10), static_cast<int>((k * 7) % 24) - 12);
  }
  return values;
}

// Bins `update` for every rank of `layout`, applies each rank's bin onto
// storage already holding values, and compares every rank's array, to the
// bit, with the same pairs added one by one in row-major order.
void expect_pair_order(const BlockCyclic& layout, const UpdateSlice<float>& update) {
  const UpdateBins bins(layout, update.rows, update.cols, update.upper_only);
  const int ranks = layout.layout().grid_rows * layout.layout().grid_cols;
  for (int rank = 0; rank < ranks; ++rank) {
    const auto elements = static_cast<std::size_t>(layout.storage_elements(rank));
    std::vector<float> applied = order_sensitive_values(elements, 0.5f);
    std::vector<float> expected = applied;
    const EncodedBin bin = encode_bin(update, bins.rows_of(rank), bins.cols_of(rank));
    apply_bin(std::span<const std::uint64_t>(bin.words), layout, rank, applied.data());
    for (std::size_t i = 0; i < update.rows.size(); ++i) {
      for (std::size_t j = 0; j < update.cols.size(); ++j) {
        const std::int64_t row = update.rows[i];
        const std::int64_t col = update.cols[j];
        if (layout.owner(row, col) != rank || (update.upper_only && row > col)) continue;
        expected[static_cast<std::size_t>(layout.local_offset(row, col))] += update.values[i * update.cols.size() + j];
      }
    }
    EXPECT_EQ(std::memcmp(applied.data(), expected.data(), elements * sizeof(float)), 0) << "rank " << rank;
  }
}

BlockCyclic two_by_two(std::int64_t n) { return BlockCyclic(MatrixLayout{n, n, 3, 2, 2, 2}); }

TEST(MatrixApplyOrderTest, AscendingIndicesAddAsThePairsInOrder) {
  const std::vector<std::int64_t> ix{0, 2, 3, 7, 8, 11, 12, 13};
  const std::vector<float> values = order_sensitive_values(ix.size() * ix.size(), 1.0f);
  for (const bool upper_only : {true, false}) {
    expect_pair_order(two_by_two(14), UpdateSlice<float>{values, ix, ix, upper_only});
  }
}

TEST(MatrixApplyOrderTest, RepeatedRowsOrRepeatedColumnsAddAsThePairsInOrder) {
  const std::vector<std::int64_t> repeated{5, 1, 5, 9, 1, 5};
  const std::vector<std::int64_t> ascending{0, 1, 4, 5, 6, 9, 10};
  const std::vector<float> values = order_sensitive_values(repeated.size() * ascending.size(), 1.0f);
  for (const bool upper_only : {true, false}) {
    expect_pair_order(two_by_two(12), UpdateSlice<float>{values, repeated, ascending, upper_only});
    if (!upper_only) expect_pair_order(two_by_two(12), UpdateSlice<float>{values, ascending, repeated, false});
  }
  // Ascending columns with repeats, ascending rows: the upper-only runs
  // start at the first of a repeat.
  const std::vector<std::int64_t> sorted_repeats{1, 4, 4, 5, 9, 9, 10};
  const std::vector<std::int64_t> rows{0, 2, 4, 5, 9, 10};
  expect_pair_order(two_by_two(12), UpdateSlice<float>{values, rows, sorted_repeats, true});
}

TEST(MatrixApplyOrderTest, RowsAndColumnsBothRepeatedAddAsThePairsInOrder) {
  // Element (5, 5) gets four values from pairs that share neither a row nor
  // a column position: only row by row keeps their order.
  const std::vector<std::int64_t> ix{5, 3, 5, 0, 7, 3};
  const std::vector<float> values = order_sensitive_values(ix.size() * ix.size(), 1.0f);
  for (const bool upper_only : {true, false}) {
    expect_pair_order(two_by_two(8), UpdateSlice<float>{values, ix, ix, upper_only});
  }
}

TEST(MatrixApplyOrderTest, ABinPackedIntoARecycledBufferIsTheSame) {
  const std::vector<std::int64_t> ix{0, 2, 3, 7, 8, 11};
  const std::vector<float> values = order_sensitive_values(ix.size() * ix.size(), 1.0f);
  const BlockCyclic layout = two_by_two(12);
  const UpdateBins bins(layout, ix, ix, true);
  const EncodedBin fresh = encode_bin(UpdateSlice<float>{values, ix, ix, true}, bins.rows_of(1), bins.cols_of(1));
  std::vector<std::uint64_t> used(fresh.words.size() + 5, ~std::uint64_t{0});
  const std::uint64_t* room = used.data();
  const EncodedBin recycled =
      encode_bin(UpdateSlice<float>{values, ix, ix, true}, bins.rows_of(1), bins.cols_of(1), std::move(used));
  EXPECT_EQ(recycled.words, fresh.words);
  EXPECT_EQ(recycled.words.data(), room);  // packed where the old bin was
}

TEST(MatrixSendSparesTest, KeepsBuffersUpToAQuarterOfTheCap) {
  SendQueue sends(MPI_COMM_NULL, 1, 4096);  // spares up to 1024 bytes
  EXPECT_TRUE(sends.spare().empty());
  std::vector<std::uint64_t> first(100);  // 800 bytes
  const std::uint64_t* first_memory = first.data();
  sends.keep(std::move(first));
  sends.keep(std::vector<std::uint64_t>(100));  // would make 1600: freed
  std::vector<std::uint64_t> spare = sends.spare();
  EXPECT_TRUE(spare.empty());
  EXPECT_GE(spare.capacity(), 100u);
  EXPECT_EQ(spare.data(), first_memory);
  EXPECT_EQ(sends.spare().capacity(), 0u);  // none left
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
