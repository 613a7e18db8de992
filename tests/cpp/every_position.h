// The positions 0..n-1 of a matrix update's values, in order: the matrix
// tests' "every element once" index list.
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

namespace resurgo {

inline std::vector<std::size_t> every_position(std::size_t n) {
  std::vector<std::size_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  return positions;
}

}  // namespace resurgo
