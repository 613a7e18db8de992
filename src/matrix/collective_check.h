// Numbers a matrix's collective calls and, with
// MatrixOptions::check_collective, makes the ranks agree on them before
// each: one MPI_Iallreduce of a code (call number, call kind) taking MIN
// and MAX. Ranks at different calls all learn it from the same reduction,
// so every rank throws, instead of some hanging in the collective that
// follows.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>

namespace resurgo {

enum class CollectiveCall { kCommit = 1, kReset = 2, kRestart = 3, kFree = 4 };

class CollectiveCheck {
 public:
  CollectiveCheck(MPI_Comm comm, bool enabled) : comm_(comm), enabled_(enabled) {}

  // Before a collective call. Throws StateError on every rank when the
  // ranks are at different calls ("commit() #2 on some ranks met free() #2
  // on others"); the ranks are then out of step for good: later calls
  // throw too, except free(), which all ranks still make together (the
  // destructor's), skipping the agreement. `meanwhile` runs while waiting
  // for the other ranks (a rank blocked sending to this one needs it).
  void enter(CollectiveCall call, const std::function<bool()>& meanwhile);

 private:
  MPI_Comm comm_;
  bool enabled_;
  std::int64_t calls_ = 0;
  bool out_of_step_ = false;
};

}  // namespace resurgo
