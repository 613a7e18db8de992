// How the ranks of a job agree on automatic checkpoints (issue 11, "beyond
// OPS"): OPS piggybacks on the application's reductions, so a code that
// issues none never checkpoints. Here the ranks exchange whether a
// checkpoint is due through the store's communicator at loop boundaries they
// all reach (every `every_loops` loops, and at each fastfw()/datlist()
// call), so they enter the region at the same loop; they take rank 0's
// location, and restore the newest version every rank can read. A job of one
// never calls the communicator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/comm.hpp"

namespace resurgo::autockpt {

class Agreement {
 public:
  Agreement(Comm& comm, std::uint64_t every_loops);

  bool alone() const { return comm_.size() == 1; }
  // At loop `loop_index`: whether any rank finds a checkpoint due. Ranks
  // exchange only at multiples of every_loops; between them this is false.
  bool due_at_loop(std::uint64_t loop_index, bool locally_due);
  // At a location call, which every rank makes: whether any rank finds one due.
  bool due_now(bool locally_due);
  // Rank 0's choice among `loops` (the loop names this rank saw), or none
  // when rank 0 has none. StateError when rank 0 chose a loop this rank
  // never saw (the ranks run different loops).
  std::optional<std::string> location(const std::optional<std::string>& mine, const std::vector<std::string>& loops);
  // The smallest of the values of every rank.
  long smallest(long value) { return alone() ? value : comm_.allreduce_min(value); }

 private:
  Comm& comm_;
  std::uint64_t every_loops_;
};

}  // namespace resurgo::autockpt
