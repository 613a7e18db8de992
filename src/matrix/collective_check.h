// Numbers a matrix's collective calls and, with
// MatrixOptions::check_collective, compares them across the ranks: each
// call's code (call number, call kind) travels in the rendezvous that opens
// its convergence (rendezvous.h), where every rank receives every other
// rank's. Ranks at different calls all see the same smallest and largest
// code, so every rank throws, instead of some hanging in the collective that
// follows.
#pragma once

#include <cstdint>

namespace resurgo {

enum class CollectiveCall { kCommit = 1, kReset = 2, kRestart = 3, kFree = 4, kReadGlobal = 5 };

class CollectiveCheck {
 public:
  explicit CollectiveCheck(bool enabled) : enabled_(enabled) {}

  // Before a collective call: its code. Once the ranks were out of step
  // (see agree()), throws StateError, except for free(), which all ranks
  // still make together (the destructor's).
  std::int64_t enter(CollectiveCall call);
  // After the call's rendezvous, with the extremes of every rank's code:
  // throws StateError on every rank when they differ ("commit() #2 on some
  // ranks met free() #2 on others"), if the check is on; the ranks are then
  // out of step for good.
  void agree(std::int64_t smallest, std::int64_t largest);

 private:
  bool enabled_;
  std::int64_t calls_ = 0;
  bool out_of_step_ = false;
};

}  // namespace resurgo
