// How the ranks of a job agree on automatic checkpoints (issue 11, "beyond
// OPS"; issue 31 part 1, real MPI): OPS piggybacks on the application's
// reductions, so a code that issues none never checkpoints. Here the ranks
// exchange whether a checkpoint is due through the store's communicator at
// loop boundaries they all reach (every `every_loops` loops, and at each
// fastfw()/datlist() call), so they enter the region at the same loop; they
// take rank 0's location, and restore the newest version every rank can read.
//
// Each exchange also compares what the ranks declared (the datasets' names,
// element types and halos, in order) and the sequence of loops they ran, so
// that ranks that diverged are named before any checkpoint is taken, and it
// has the store's mpi.timeout as deadline, so that a rank that died makes
// the others fail with a clear error instead of hanging. A job of one never
// calls the communicator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auto/dataset_table.h"
#include "resurgo/comm.hpp"

namespace resurgo::autockpt {

// Where a rank is at an exchange: what it declared and ran so far.
struct Progress {
  const DatasetTable& datasets;
  std::uint64_t sequence_hash = 0;  // of the loops so far, names and arguments
  std::uint64_t loop_index = 0;
  std::string_view call;            // the loop's name, or "fastfw" / "datlist"
};

class Agreement {
 public:
  // `store_what` ("store 'name'") names the store in messages; a rank that
  // has not reached an exchange after `timeout_seconds` makes it fail.
  Agreement(Comm& comm, std::uint64_t every_loops, double timeout_seconds, std::string store_what);

  bool alone() const { return comm_.size() == 1; }
  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  // At loop `here.loop_index`: whether any rank finds a checkpoint due. Ranks
  // exchange only at multiples of every_loops; between them this is false.
  // MismatchError naming the ranks (and the first dataset that differs)
  // when the ranks declared other datasets or ran other loops; StateError
  // when a rank did not come within the timeout.
  bool due_at_loop(bool locally_due, const Progress& here);
  // At a location call, which every rank makes: as due_at_loop, at once.
  bool due_now(bool locally_due, const Progress& here);
  // Rank 0's choice among `loops` (the loop names this rank saw), or none
  // when rank 0 has none. StateError when rank 0 chose a loop this rank
  // never saw (the ranks run different loops).
  std::optional<std::string> location(const std::optional<std::string>& mine, const std::vector<std::string>& loops);
  // The smallest of the values of every rank.
  long smallest(long value) { return alone() ? value : comm_.allreduce_min(value); }
  // The largest of the values of every rank.
  long largest(long value) { return -smallest(-value); }
  // Every rank's `value`, indexed by rank (with the store's timeout).
  std::vector<long> everyone(long value) {
    return alone() ? std::vector<long>{value} : comm_.allgather(value, timeout_seconds_);
  }
  // Rank 0's `mine`, on every rank.
  std::string rank_zeros(const std::string& mine);
  // The newest of the versions `held` below `below` that every rank holds,
  // or -1 (base/newest_everywhere.h).
  long newest_everywhere(const std::vector<long>& held, long below);

 private:
  std::vector<long> gather(long value, const Progress& here);
  [[noreturn]] void throw_declared_otherwise(const std::vector<long>& values, const Progress& here);
  [[noreturn]] void throw_ran_otherwise(const std::vector<long>& values, const Progress& here);
  std::string collect_at_rank_zero(const std::string& mine);
  std::string at(const Progress& here) const;

  Comm& comm_;
  std::uint64_t every_loops_;
  double timeout_seconds_;
  std::string store_what_;
  std::uint64_t last_exchange_ = 0;  // the loop index of the previous exchange
};

}  // namespace resurgo::autockpt
