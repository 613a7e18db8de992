// The queue update() copies into (src/matrix/update_queue.h) recycles the
// arrays of the updates taken off its front, so that a copy goes into
// memory already mapped. The matrix sources exist only in a build with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "matrix/update_queue.h"

namespace resurgo {
namespace {

TEST(MatrixUpdateQueueRecycleTest, ACopyReusesTheArraysOfAnUpdateTakenOff) {
  const std::vector<double> first_values(1000, 1.0);
  const std::vector<double> second_values(900, 2.0);
  const std::vector<std::int64_t> rows{0, 1};
  const std::vector<std::int64_t> cols(500, 3);
  UpdateQueue<double> queue(1 << 20);
  queue.push_copy(UpdateSlice<double>{first_values, rows, cols, false});
  const double* first_array = queue.front()->values.data();
  queue.pop_front();
  EXPECT_TRUE(queue.empty());
  EXPECT_TRUE(queue.has_room(1 << 20));  // a spare counts against no cap
  // Had the array been freed, this would most likely take its memory.
  const std::vector<double> blocker(1000, 0.0);

  queue.push_copy(UpdateSlice<double>{second_values, cols, rows, false});  // all values copied
  const QueuedUpdate<double>* second = queue.front();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->values.data(), first_array);  // the same memory, not a new allocation
  EXPECT_TRUE(std::equal(second->values.begin(), second->values.end(), second_values.begin(), second_values.end()));
  EXPECT_EQ(second->rows, cols);
  EXPECT_EQ(second->cols, rows);
  EXPECT_FALSE(second->upper_only);
  EXPECT_EQ(second->bytes(), 900 * sizeof(double) + 502 * sizeof(std::int64_t));
  EXPECT_NE(blocker.data(), first_array);
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
