// ConvergentMatrix's messages backend without MPI calls: the bin message
// (src/matrix/bin_message.h), of which a symmetric update's carries one
// triangle, and the queue update() copies into (src/matrix/update_queue.h).
// The matrix sources exist only in a build with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "every_position.h"
#include "matrix/bin_message.h"
#include "matrix/update_queue.h"
#include "resurgo/errors.hpp"

namespace resurgo {
namespace {

// Everything on one process: its local array is the column-major matrix.
BlockCyclic one_process(std::int64_t n) { return BlockCyclic(MatrixLayout{n, n, 4, 4, 1, 1}); }

// Values whose sums depend on the order of the additions.
std::vector<float> awkward_values(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t k = 0; k < count; ++k) {
    values[k] = 1.0f / static_cast<float>(3 + 7 * k) - 0.01f * static_cast<float>(k % 5);
  }
  return values;
}

TEST(MatrixBinTest, ASymmetricBinCarriesOneTriangleAndAddsItAsTheSquareWould) {
  const std::vector<std::int64_t> ix{5, 1, 3, 3, 0, 5};  // unsorted, with duplicates
  const std::size_t n = ix.size();
  const std::vector<float> values = awkward_values(n * n);
  const BlockCyclic layout = one_process(8);
  const std::vector<std::size_t> positions = every_position(n);

  const EncodedBin bin = encode_bin(UpdateSlice<float>{values, ix, ix, true}, positions, positions);
  std::uint64_t upper = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) upper += ix[i] <= ix[j] ? 1 : 0;
  }
  EXPECT_EQ(bin.values, upper);
  EXPECT_EQ(bin.words.size(), bin_words(2 * n, upper, sizeof(float)));
  const EncodedBin square = encode_bin(UpdateSlice<float>{values, ix, ix, false}, positions, positions);
  EXPECT_EQ(square.values, n * n);
  EXPECT_LT(bin.words.size(), square.words.size());

  // On top of values already there, in the order of the pairs.
  std::vector<float> applied = awkward_values(64);
  std::vector<float> expected = applied;
  apply_bin(bin.words, layout, 0, applied.data());
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (ix[i] <= ix[j]) expected[static_cast<std::size_t>(layout.local_offset(ix[i], ix[j]))] += values[i * n + j];
    }
  }
  EXPECT_EQ(std::memcmp(applied.data(), expected.data(), applied.size() * sizeof(float)), 0);
}

TEST(MatrixBinTest, ASymmetricBinLeavesOutRowsAndColumnsThatPairWithNothing) {
  // The rows {9, 2} and columns {1, 5} of one owner: row 9 lies below every
  // column, column 1 before every row; only (2, 5) is added.
  const std::vector<std::int64_t> rows{9, 2};
  const std::vector<std::int64_t> cols{1, 5};
  const std::vector<double> values{1, 2, 3, 4};
  const std::vector<std::size_t> positions{0, 1};
  const EncodedBin bin = encode_bin(UpdateSlice<double>{values, rows, cols, true}, positions, positions);
  EXPECT_EQ(bin.values, 1u);
  EXPECT_EQ(bin.words.size(), bin_words(2, 1, sizeof(double)));

  const BlockCyclic layout = one_process(10);
  std::vector<double> storage(100, 0.0);
  apply_bin(bin.words, layout, 0, storage.data());
  EXPECT_EQ(storage[static_cast<std::size_t>(layout.local_offset(2, 5))], 4.0);
  EXPECT_EQ(std::accumulate(storage.begin(), storage.end(), 0.0), 4.0);
}

TEST(MatrixBinTest, ADamagedBinIsRefusedBeforeAnythingIsAdded) {
  const std::vector<std::int64_t> ix{0, 2, 1};
  const std::vector<float> values = awkward_values(9);
  const std::vector<std::size_t> positions = every_position(3);
  const BlockCyclic layout = one_process(4);
  for (const bool upper_only : {true, false}) {
    std::vector<std::uint64_t> words = encode_bin(UpdateSlice<float>{values, ix, ix, upper_only}, positions,
                                                  positions)
                                           .words;
    words.pop_back();  // a value short
    std::vector<float> storage(16, 0.0f);
    EXPECT_THROW(apply_bin(std::span<const std::uint64_t>(words), layout, 0, storage.data()), StateError);
    words[1] = ~std::uint64_t{0};  // more rows than words
    EXPECT_THROW(apply_bin(std::span<const std::uint64_t>(words), layout, 0, storage.data()), StateError);
    EXPECT_EQ(std::accumulate(storage.begin(), storage.end(), 0.0f), 0.0f);
  }
}

TEST(MatrixUpdateQueueTest, CopiesTheCallersArrays) {
  std::vector<double> values{1, 2};
  std::vector<std::int64_t> rows{3};
  std::vector<std::int64_t> cols{4, 5};
  const QueuedUpdate<double> copy(UpdateSlice<double>{values, rows, cols, false});
  values[0] = 99;
  rows[0] = cols[0] = 99;
  EXPECT_EQ(copy.slice().values[0], 1.0);
  EXPECT_EQ(copy.slice().rows[0], 3);
  EXPECT_EQ(copy.slice().cols[0], 4);
  EXPECT_EQ(copy.bytes(), 2 * sizeof(double) + 3 * sizeof(std::int64_t));
}

TEST(MatrixUpdateQueueTest, HoldsUpToItsCapacityAndALargerUpdateOnlyAlone) {
  const std::vector<double> one{1};
  const std::vector<std::int64_t> index{0};
  const UpdateSlice<double> small{one, index, index, false};  // 24 bytes
  UpdateQueue<double> queue(60);
  EXPECT_TRUE(queue.empty());
  queue.push(QueuedUpdate<double>(small));
  const QueuedUpdate<double>* first = queue.front();
  queue.push(QueuedUpdate<double>(small));
  EXPECT_FALSE(queue.has_room(24));  // 48 + 24 > 60
  EXPECT_EQ(queue.front(), first);   // pushing moved nothing
  queue.pop_front();
  EXPECT_TRUE(queue.has_room(24));
  EXPECT_FALSE(queue.has_room(100));
  queue.pop_front();
  EXPECT_TRUE(queue.empty());
  EXPECT_TRUE(queue.has_room(100));  // alone
  EXPECT_EQ(queue.front(), nullptr);
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
