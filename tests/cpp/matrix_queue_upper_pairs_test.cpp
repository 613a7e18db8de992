// update() copies of a symmetric update only the pairs its bins carry (the
// upper triangle: rows[i] <= cols[j]) when its column indices are
// ascending, about half the values (src/matrix/update_queue.h); the bins
// encoded from the copy are those of the caller's arrays, bit for bit.
// The matrix sources exist only in a build with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "every_position.h"
#include "matrix/bin_message.h"
#include "matrix/update_queue.h"

namespace resurgo {
namespace {

std::vector<float> distinct_values(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t k = 0; k < count; ++k) values[k] = 1.0f / static_cast<float>(3 + 7 * k);
  return values;
}

// Makes the queue's next copy go into a recycled array of n * n `stale` values.
void leave_stale_spare(UpdateQueue<float>& queue, std::size_t n, float stale) {
  const std::vector<float> old_values(n * n, stale);
  const std::vector<std::int64_t> old_ix(n, 0);
  queue.push_copy(UpdateSlice<float>{old_values, old_ix, old_ix, false});
  queue.pop_front();
}

TEST(MatrixQueueUpperPairsTest, AnAscendingSymmetricUpdateCopiesOnlyItsUpperPairs) {
  const std::vector<std::int64_t> ix{0, 2, 2, 5, 7};  // ascending, one index twice
  const std::size_t n = ix.size();
  const std::vector<float> values = distinct_values(n * n);
  constexpr float kStale = -1.0f;
  UpdateQueue<float> queue(1 << 20);
  leave_stale_spare(queue, n, kStale);
  queue.push_copy(UpdateSlice<float>{values, ix, ix, true});
  const QueuedUpdate<float>& copy = *queue.front();
  ASSERT_EQ(copy.values.size(), n * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      const float expected = ix[i] <= ix[j] ? values[i * n + j] : kStale;
      EXPECT_EQ(copy.values[i * n + j], expected) << "pair (" << i << ", " << j << ")";
    }
  }
  const std::vector<std::size_t> positions = every_position(n);
  EXPECT_EQ(encode_bin(copy.slice(), positions, positions).words,
            encode_bin(UpdateSlice<float>{values, ix, ix, true}, positions, positions).words);
}

TEST(MatrixQueueUpperPairsTest, UnsortedIndicesAndFullUpdatesAreCopiedWhole) {
  const std::vector<std::int64_t> unsorted{5, 1, 3};
  const std::vector<std::int64_t> ascending{1, 3, 5};
  const std::vector<float> values = distinct_values(9);
  for (const auto& [ix, upper_only] : {std::pair{unsorted, true}, std::pair{ascending, false}}) {
    UpdateQueue<float> queue(1 << 20);
    leave_stale_spare(queue, 3, -1.0f);
    queue.push_copy(UpdateSlice<float>{values, ix, ix, upper_only});
    EXPECT_TRUE(std::equal(queue.front()->values.begin(), queue.front()->values.end(), values.begin(), values.end()));
  }
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
