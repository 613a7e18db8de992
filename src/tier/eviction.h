// Which versions a level evicts: one rule for every level, so that memory
// and directory levels never disagree on what a chain needs.
#pragma once

#include <functional>
#include <optional>
#include <vector>

namespace resurgo {

// The versions of `listed` (ascending) beyond the newest `keep` (0 = keep
// all), except those for which `pinned(version)` is true and the bases of
// every version kept, transitively (`base_of`: none for a full version).
// Returned newest first: removing in that order, a crash part way never
// leaves a delta without its base.
std::vector<int> versions_to_evict(const std::vector<int>& listed, int keep, const std::function<bool(int)>& pinned,
                                   const std::function<std::optional<int>(int)>& base_of);

}  // namespace resurgo
