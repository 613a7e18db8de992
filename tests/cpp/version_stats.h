// A version's stats once it is durable on L2, for the capture tests.
#pragma once

#include <stdexcept>
#include <string>

#include "resurgo/resurgo.hpp"

namespace resurgo {

inline VersionStats stats_of(Store& store, int version) {
  store.wait(version, kL2);
  for (const VersionStats& stats : store.stats()) {
    if (stats.version == version) return stats;
  }
  throw std::runtime_error("no stats of version " + std::to_string(version));
}

}  // namespace resurgo
