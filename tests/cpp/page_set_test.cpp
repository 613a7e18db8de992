#include "track/page_set.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "track/tracker.h"

namespace resurgo::track {
namespace {

std::vector<std::pair<std::size_t, std::size_t>> runs(const PageSet& set) {
  std::vector<std::pair<std::size_t, std::size_t>> found;
  set.for_each_run([&](std::size_t first, std::size_t count) { found.emplace_back(first, count); });
  return found;
}

TEST(PageSetTest, RunsAcrossWordBoundariesAndAtTheEnds) {
  PageSet set(130);
  set.insert(0);
  set.insert_range(62, 4);  // 62..65: across the first word boundary
  set.insert_range(128, 10);  // clipped to the last page, 129
  EXPECT_EQ(set.count(), 7u);
  EXPECT_TRUE(set.contains(64));
  EXPECT_FALSE(set.contains(66));
  using Run = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(runs(set), (std::vector<Run>{{0, 1}, {62, 4}, {128, 2}}));
}

TEST(PageSetTest, EmptySetHasNoRuns) {
  EXPECT_TRUE(runs(PageSet(0)).empty());
  EXPECT_TRUE(runs(PageSet(200)).empty());
  EXPECT_EQ(PageSet(200).count(), 0u);
}

TEST(PagesSpanned, CountsEveryPageARegionTouches) {
  const std::size_t page = page_size();
  auto* aligned = reinterpret_cast<std::byte*>(page * 16);
  EXPECT_EQ(pages_spanned(aligned, 1), 1u);
  EXPECT_EQ(pages_spanned(aligned, page), 1u);
  EXPECT_EQ(pages_spanned(aligned, page + 1), 2u);
  EXPECT_EQ(pages_spanned(aligned + page - 1, 2), 2u);  // one byte on each side of a boundary
  EXPECT_EQ(pages_spanned(aligned, 0), 0u);
}

}  // namespace
}  // namespace resurgo::track
