// The pieces of an old block that land in a new one (src/job/redistribution.h).
#include <gtest/gtest.h>

#include "job/redistribution.h"

namespace resurgo {
namespace {

TEST(OverlapRuns, RowBlocksOverlapInOneRun) {
  // Old rows [10, 30) of a 100 x 4 array of 8-byte elements, new rows [20, 50).
  const std::vector<BlockRun> runs = overlap_runs({10, 0}, {20, 4}, {20, 0}, {30, 4}, 8);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (BlockRun{10 * 4 * 8, 0, 10 * 4 * 8}));
}

TEST(OverlapRuns, ColumnBlocksOverlapInOneRunPerRow) {
  // Old block rows [0, 3) x cols [0, 4); new block rows [1, 3) x cols [2, 6), 1-byte elements.
  const std::vector<BlockRun> runs = overlap_runs({0, 0}, {3, 4}, {1, 2}, {2, 4}, 1);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], (BlockRun{1 * 4 + 2, 0, 2}));
  EXPECT_EQ(runs[1], (BlockRun{2 * 4 + 2, 4, 2}));
}

TEST(OverlapRuns, ThreeAxesVisitEveryLeadingIndex) {
  const std::vector<BlockRun> runs = overlap_runs({0, 0, 0}, {2, 2, 4}, {0, 1, 2}, {2, 1, 2}, 4);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0], (BlockRun{(0 * 8 + 1 * 4 + 2) * 4, 0, 8}));
  EXPECT_EQ(runs[1], (BlockRun{(1 * 8 + 1 * 4 + 2) * 4, 8, 8}));
}

TEST(OverlapRuns, DisjointBlocksHaveNoRun) {
  EXPECT_TRUE(overlap_runs({0, 0}, {5, 5}, {5, 0}, {5, 5}, 8).empty());
  EXPECT_TRUE(overlap_runs({0}, {5}, {7}, {2}, 8).empty());
}

TEST(OverlapRuns, OneAxisIsOneRun) {
  const std::vector<BlockRun> runs = overlap_runs({3}, {10}, {0}, {8}, 2);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (BlockRun{0, 6, 10}));
}

TEST(RedistributionProblem, NamesARegionThatIsNotGlobal) {
  format::Manifest manifest{"s", "", 1, 2, {}, {}};
  int value = 0;
  Region region{0, "local", reinterpret_cast<std::byte*>(&value), sizeof value, {"int32", {1}}, {}};
  EXPECT_NE(redistribution_problem(manifest, {region}).find("region 'local' is not declared"), std::string::npos);
}

}  // namespace
}  // namespace resurgo
