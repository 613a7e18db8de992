#include "matrix/collective_check.h"

#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr std::int64_t kKinds = 8;  // code = call number * kKinds + kind

std::string describe(std::int64_t code) {
  static const char* const kNames[] = {"?", "commit()", "reset()", "restart()", "free()", "read_global()"};
  const std::int64_t kind = code % kKinds;
  const char* name = kind >= 1 && kind <= 5 ? kNames[kind] : kNames[0];
  return std::string(name) + " #" + std::to_string(code / kKinds);
}

}  // namespace

std::int64_t CollectiveCheck::enter(CollectiveCall call) {
  ++calls_;
  if (out_of_step_ && call != CollectiveCall::kFree) {
    throw StateError(
        "ConvergentMatrix: an earlier collective call was not the same on every rank (see its error); "
        "the matrix can only be freed");
  }
  return calls_ * kKinds + static_cast<std::int64_t>(call);
}

void CollectiveCheck::agree(std::int64_t smallest, std::int64_t largest) {
  if (!enabled_ || out_of_step_ || smallest == largest) return;
  out_of_step_ = true;
  throw StateError("ConvergentMatrix: " + describe(smallest) + " on some ranks met " + describe(largest) +
                   " on others (#N counts the matrix's collective calls: commit, reset, restart, read_global, free): every rank "
                   "must make them in the same order");
}

}  // namespace resurgo
