#include "matrix/collective_check.h"

#include <string>

#include "matrix/mpi_call.h"
#include "matrix/polite_wait.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr std::int64_t kKinds = 8;  // code = call number * kKinds + kind

std::string describe(std::int64_t code) {
  static const char* const kNames[] = {"?", "commit()", "reset()", "restart()", "free()"};
  const std::int64_t kind = code % kKinds;
  const char* name = kind >= 1 && kind <= 4 ? kNames[kind] : kNames[0];
  return std::string(name) + " #" + std::to_string(code / kKinds);
}

}  // namespace

void CollectiveCheck::enter(CollectiveCall call, const std::function<bool()>& meanwhile) {
  ++calls_;
  if (out_of_step_) {
    if (call == CollectiveCall::kFree) return;
    throw StateError(
        "ConvergentMatrix: an earlier collective call was not the same on every rank (see its error); "
        "the matrix can only be freed");
  }
  if (!enabled_) return;
  const std::int64_t code = calls_ * kKinds + static_cast<std::int64_t>(call);
  std::int64_t mine[2] = {code, -code};
  std::int64_t extremes[2] = {0, 0};
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(mine, extremes, 2, MPI_INT64_T, MPI_MAX, comm_, &request), "MPI_Iallreduce");
  wait_politely(request, meanwhile);
  const std::int64_t smallest = -extremes[1];
  const std::int64_t largest = extremes[0];
  if (smallest == largest) return;
  out_of_step_ = true;
  throw StateError("ConvergentMatrix: " + describe(smallest) + " on some ranks met " + describe(largest) +
                   " on others (#N counts the matrix's collective calls: commit, reset, restart, free): every rank "
                   "must make them in the same order");
}

}  // namespace resurgo
