// Values that tell the version they were written for: value i of version v
// is v * 1e6 + i, so that a restart's result is checked against the version
// it should hold, and no two versions' states are alike.
#pragma once

#include <cstddef>
#include <vector>

namespace resurgo {

inline void fill_version_pattern(std::vector<double>& values, int version) {
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = version * 1e6 + static_cast<double>(i);
}

// Whether every `stride`-th value is `version`'s (a stride above 1 checks a
// large state in a sample).
inline bool has_version_pattern(const std::vector<double>& values, int version, std::size_t stride = 1) {
  for (std::size_t i = 0; i < values.size(); i += stride) {
    if (values[i] != version * 1e6 + static_cast<double>(i)) return false;
  }
  return true;
}

}  // namespace resurgo
