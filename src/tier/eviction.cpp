#include "tier/eviction.h"

#include <algorithm>

namespace resurgo {

namespace {

// The versions eviction keeps: the newest `keep` (added in ascending order,
// each at the end) and the few pinned ones and bases. A sorted vector, not
// a tree: this runs at every checkpoint, and a tree allocates per version.
class VersionSet {
 public:
  // Room for `versions` without growing: each growth is an allocation.
  explicit VersionSet(std::size_t versions) { sorted_.reserve(versions); }
  bool contains(int version) const { return std::binary_search(sorted_.begin(), sorted_.end(), version); }
  // False when the version was there already.
  bool insert(int version) {
    const auto at = std::lower_bound(sorted_.begin(), sorted_.end(), version);
    if (at != sorted_.end() && *at == version) return false;
    sorted_.insert(at, version);
    return true;
  }
  const std::vector<int>& ascending() const { return sorted_; }

 private:
  std::vector<int> sorted_;
};

}  // namespace

std::vector<int> versions_to_evict(const std::vector<int>& listed, int keep, const std::function<bool(int)>& pinned,
                                   const std::function<std::optional<int>(int)>& base_of) {
  std::vector<int> evicted;
  if (keep <= 0 || listed.size() <= static_cast<std::size_t>(keep)) return evicted;
  evicted.reserve(listed.size() - keep);
  VersionSet retained(listed.size());
  for (auto version = listed.end() - keep; version != listed.end(); ++version) retained.insert(*version);
  // The newest `keep` are retained anyway: only the older ones ask whether
  // they are pinned (a question to the catalog, under its lock).
  for (auto version = listed.begin(); version != listed.end() - keep; ++version) {
    if (pinned(*version)) retained.insert(*version);
  }
  std::vector<int> unresolved = retained.ascending();
  while (!unresolved.empty()) {
    const int version = unresolved.back();
    unresolved.pop_back();
    const std::optional<int> base = base_of(version);
    if (base && retained.insert(*base)) unresolved.push_back(*base);
  }
  for (auto version = listed.rbegin(); version != listed.rend(); ++version) {
    if (!retained.contains(*version)) evicted.push_back(*version);
  }
  return evicted;
}

}  // namespace resurgo
