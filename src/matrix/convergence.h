// Converging a matrix: commit(), and the start of reset(), restart() and
// free(). When it returns on a rank, that rank's part holds every update any
// rank issued before its own call, and every rank has made the call. It
// goes in steps, each a polite wait (polite_wait.h) that applies arriving
// bins meanwhile, so that no rank waiting here holds up a sender capped by
// max_in_flight_bytes:
//   1. this rank's queued updates are all sent;
//   2. the rendezvous (rendezvous.h): each rank learns how many bins each
//      other rank sent it (and that every rank has come), and the
//      collective check compares the calls;
//   3. this rank has applied that many bins from each rank, and its own
//      sends completed.
// No barrier follows: a rank's part is complete once its own step 3 is, and
// a rank that returns early cannot touch another's part but through new
// bins, which that rank, still converging, leaves for later (it takes only
// the bins still owed). Before step 2 and after step 3 the backend
// synchronizes its array (RMA's MPI_Win_sync): every rank entered the call
// after its last accumulate had completed.
// A step that outlasts the deadline throws StateError naming the ranks it
// waits for and keeps its place: the next run() goes on from there (the
// call made again), so the messages the other ranks sent still meet their
// match.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "matrix/collective_check.h"
#include "matrix/polite_wait.h"
#include "matrix/rendezvous.h"
#include "matrix/update_backend.h"

namespace resurgo {

// "rank 3", "ranks 1 and 3", "ranks 1, 3 and 5"; past 8, the first 8 and
// how many more.
std::string name_ranks(std::span<const int> ranks);

class Convergence {
 public:
  Convergence(MPI_Comm comm, int rank) : comm_(comm), rank_(rank) {}

  // Whether a run() timed out before its end: only that call may come next.
  bool pending() const { return pending_; }
  // Converges, or goes on with the pending convergence (whose code then
  // stands). `call` names the public call in errors: "commit".
  void run(ConvergeHooks& backend, CollectiveCheck& check, std::int64_t code, const char* call,
           const Deadline& deadline);

 private:
  // The step's wait, running `meanwhile` between tests, or StateError from
  // `call` saying what it still waits for (`waiting` builds that text only
  // then).
  void wait_for(const std::function<bool()>& done, const std::function<bool()>& meanwhile, const char* call,
                const Deadline& deadline, const std::function<std::string()>& waiting);
  void finish();

  MPI_Comm comm_;
  int rank_;
  bool pending_ = false;
  std::int64_t code_ = 0;
  std::unique_ptr<Rendezvous> rendezvous_;  // from step 2 on
  bool agreed_ = false;
};

}  // namespace resurgo
