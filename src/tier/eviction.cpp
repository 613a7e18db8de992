#include "tier/eviction.h"

#include <set>

namespace resurgo {

std::vector<int> versions_to_evict(const std::vector<int>& listed, int keep, const std::function<bool(int)>& pinned,
                                   const std::function<std::optional<int>(int)>& base_of) {
  std::vector<int> evicted;
  if (keep <= 0 || listed.size() <= static_cast<std::size_t>(keep)) return evicted;
  std::set<int> retained(listed.end() - keep, listed.end());
  for (int version : listed) {
    if (pinned(version)) retained.insert(version);
  }
  std::vector<int> unresolved(retained.begin(), retained.end());
  while (!unresolved.empty()) {
    const int version = unresolved.back();
    unresolved.pop_back();
    const std::optional<int> base = base_of(version);
    if (base && retained.insert(*base).second) unresolved.push_back(*base);
  }
  for (auto version = listed.rbegin(); version != listed.rend(); ++version) {
    if (retained.count(*version) == 0) evicted.push_back(*version);
  }
  return evicted;
}

}  // namespace resurgo
