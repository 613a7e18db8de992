#include "matrix/target_order.h"

#include <algorithm>

namespace resurgo {

namespace {

// SplitMix64's finalizer: seeds that differ in one bit (neighbouring ranks)
// give unrelated generator states.
std::uint64_t mix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9;
  value = (value ^ (value >> 27)) * 0x94d049bb133111eb;
  return value ^ (value >> 31);
}

}  // namespace

TargetOrder::TargetOrder(std::uint64_t seed, int rank, MatrixTargetOrder kind)
    : kind_(kind), engine_(mix(seed ^ mix(static_cast<std::uint64_t>(rank)))) {}

void TargetOrder::arrange(std::vector<int>& targets) {
  if (kind_ == MatrixTargetOrder::kFixed) {
    std::sort(targets.begin(), targets.end());
  } else {
    std::shuffle(targets.begin(), targets.end(), engine_);
  }
}

}  // namespace resurgo
