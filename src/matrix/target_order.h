// The random order in which an update visits its targets (the paper's
// section III-C2): when every rank sends its bins in the same order, the
// ranks' sends converge on one target at a time; shuffled per update with
// a generator seeded differently on each rank, they spread out.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace resurgo {

class TargetOrder {
 public:
  // The same (seed, rank) gives the same sequence of orders.
  TargetOrder(std::uint64_t seed, int rank);

  void shuffle(std::vector<int>& targets);

 private:
  std::mt19937_64 engine_;
};

}  // namespace resurgo
