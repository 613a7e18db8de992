// versions_to_evict: the rule every level evicts by.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tier/eviction.h"

namespace resurgo {
namespace {

TEST(EvictionRuleTest, KeepsTheNewestThePinnedAndTheirBasesTransitively) {
  const std::vector<int> listed{1, 2, 3, 4, 5, 6, 7, 8, 9};
  // 9 is a delta on 8, 8 on 5; 3 is pinned and a delta on 2, 2 on 1.
  const std::map<int, int> bases{{9, 8}, {8, 5}, {3, 2}, {2, 1}};
  const auto base_of = [&](int version) -> std::optional<int> {
    const auto found = bases.find(version);
    return found == bases.end() ? std::nullopt : std::optional<int>(found->second);
  };
  const std::vector<int> evicted = versions_to_evict(listed, 2, [](int version) { return version == 3; }, base_of);
  EXPECT_EQ(evicted, (std::vector<int>{7, 6, 4}));  // newest first
}

TEST(EvictionRuleTest, NothingGoesWhenKeepIsZeroOrCoversEveryVersion) {
  const auto never = [](int) { return false; };
  const auto full = [](int) { return std::optional<int>(); };
  EXPECT_TRUE(versions_to_evict({1, 2, 3}, 0, never, full).empty());
  EXPECT_TRUE(versions_to_evict({1, 2, 3}, 3, never, full).empty());
  EXPECT_EQ(versions_to_evict({1, 2, 3}, 1, never, full), (std::vector<int>{2, 1}));
}

// Each question costs a catalog lookup under its lock: the newest `keep`
// are kept whatever the answer, so they are not asked about.
TEST(EvictionRuleTest, OnlyVersionsBeyondTheNewestKeptAreAskedWhetherPinned) {
  std::set<int> asked;
  const auto pinned = [&](int version) {
    asked.insert(version);
    return false;
  };
  versions_to_evict({10, 11, 12, 13, 14}, 3, pinned, [](int) { return std::optional<int>(); });
  EXPECT_EQ(asked, (std::set<int>{10, 11}));
}

}  // namespace
}  // namespace resurgo
