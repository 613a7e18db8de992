// The order in which an update visits its targets (src/matrix/target_order.h):
// random by default, or fixed (ascending, the same on every rank) for
// bench/matrix.py's comparison. The matrix sources exist only in a build
// with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "matrix/target_order.h"

namespace resurgo {
namespace {

std::vector<int> descending(int count) {
  std::vector<int> targets(static_cast<std::size_t>(count));
  std::iota(targets.rbegin(), targets.rend(), 0);
  return targets;
}

TEST(MatrixTargetOrderTest, TheFixedOrderIsAscendingOnEveryRankAndEveryUpdate) {
  const std::vector<int> ascending = [] {
    std::vector<int> t = descending(16);
    std::sort(t.begin(), t.end());
    return t;
  }();
  for (const int rank : {0, 1, 7}) {
    TargetOrder order(0x5eed, rank, MatrixTargetOrder::kFixed);
    for (int update = 0; update < 3; ++update) {
      std::vector<int> targets = descending(16);
      order.arrange(targets);
      EXPECT_EQ(targets, ascending) << "rank " << rank << ", update " << update;
    }
  }
}

TEST(MatrixTargetOrderTest, TheDefaultOrderIsRandomPerRankAndRepeatable) {
  EXPECT_EQ(MatrixOptions{}.target_order, MatrixTargetOrder::kRandom);
  std::vector<int> first = descending(16);
  std::vector<int> second = first;
  std::vector<int> again = first;
  TargetOrder(0x5eed, 0).arrange(first);
  TargetOrder(0x5eed, 1).arrange(second);
  TargetOrder(0x5eed, 0, MatrixTargetOrder::kRandom).arrange(again);
  EXPECT_NE(first, second);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, descending(16));
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, second);  // a permutation: every target once
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
