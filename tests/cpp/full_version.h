// A full version of one region, "state", holding `state` in chunks of
// 1 MiB: the Snapshot the Scheduler tests hand to the pipeline.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "capture/snapshot.h"

namespace resurgo::testing {

inline Snapshot full_version(const std::string& store, int version, const std::vector<std::byte>& state) {
  Snapshot snapshot;
  snapshot.header.store = store;
  snapshot.header.version = version;
  snapshot.header.chunk_size = std::uint64_t{1} << 20;
  format::RegionEntry region;
  region.label = "state";
  region.bytes = state.size();
  snapshot.header.regions.push_back(region);
  snapshot.extents.push_back(Extent{0, 0, state.size(), state.data()});
  return snapshot;
}

}  // namespace resurgo::testing
