// The order in which an update visits its targets (the paper's section
// III-C2): when every rank sends its bins in the same order, the ranks'
// sends converge on one target at a time; shuffled per update with a
// generator seeded differently on each rank, they spread out. The fixed
// order exists to measure that (MatrixTargetOrder::kFixed).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "resurgo/matrix.hpp"

namespace resurgo {

class TargetOrder {
 public:
  // The same (seed, rank) gives the same sequence of random orders.
  TargetOrder(std::uint64_t seed, int rank, MatrixTargetOrder kind = MatrixTargetOrder::kRandom);

  // Puts `targets` in the order this rank visits them: shuffled (kRandom) or
  // ascending, the same on every rank (kFixed).
  void arrange(std::vector<int>& targets);

 private:
  MatrixTargetOrder kind_;
  std::mt19937_64 engine_;
};

}  // namespace resurgo
