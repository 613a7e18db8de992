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
//
// Off the application's thread where the communicator allows it
// (threads_may_call()): the exchanges every `every_loops` loops are posted
// to a thread (posted_gather.h) and their answer collected at the next one,
// so that a rank waits for the others only when one lags by more than an
// exchange interval. The decision still falls at the same loop on every
// rank, one exchange later. The rare calls (fastfw/datlist, the location,
// versions at attach and restore) stay blocking: see docs/auto.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auto/dataset_table.h"
#include "auto/posted_gather.h"
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
  // Collective when it will be pipelined (it duplicates `comm`).
  Agreement(Comm& comm, std::uint64_t every_loops, double timeout_seconds, std::string store_what);

  bool alone() const { return comm_.size() == 1; }
  int rank() const { return comm_.rank(); }
  int ranks() const { return comm_.size(); }
  // Whether due_at_loop posts its exchanges to a thread and collects their
  // answer at the next exchange (a job of more than one rank whose
  // communicator threads_may_call()), or exchanges at once, blocking.
  bool pipelined() const { return posted_ != nullptr; }
  // At loop `here.loop_index`: whether a rank found a checkpoint due, the
  // same answer at the same loop on every rank. Ranks exchange only at
  // multiples of every_loops; between them this is false. Pipelined, the
  // answer is the previous exchange's, and `locally_due` goes to the next
  // one (none is posted when the answer is true: the checkpoint it starts
  // is the one due). MismatchError naming the ranks (and the first dataset
  // that differs) when the ranks declared other datasets or ran other
  // loops; StateError when a rank did not come within the timeout. Both
  // name the exchange where it happened (pipelined: found at the next).
  bool due_at_loop(bool locally_due, const Progress& here);
  // At a location call, which every rank makes: collects the exchange
  // posted last, if any, and unless it answers true, exchanges at once,
  // blocking.
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
  // What this rank sent at an exchange, kept until its answer comes back.
  struct Sent {
    long value = 0;
    std::uint64_t loop_index = 0;
    std::string call;
    std::size_t datasets = 0;  // declared by then (a DatasetTable only grows)
    std::uint64_t since = 0;   // the loop of the exchange decided before it (0: none)
  };
  Sent sent(bool locally_due, const Progress& here) const;
  bool collect_posted(const DatasetTable& datasets);
  std::vector<long> values_of(const Sent& sent, const std::function<std::vector<long>()>& gather) const;
  bool decide(const std::vector<long>& values, const Sent& sent, const DatasetTable& datasets);
  [[noreturn]] void throw_declared_otherwise(const std::vector<long>& values, const Sent& sent,
                                             const DatasetTable& datasets);
  [[noreturn]] void throw_ran_otherwise(const std::vector<long>& values, const Sent& sent);
  std::string collect_at_rank_zero(const std::string& mine);
  static std::string at(const Sent& sent);

  Comm& comm_;
  std::uint64_t every_loops_;
  double timeout_seconds_;
  std::string store_what_;
  std::uint64_t last_exchange_ = 0;  // the loop index of the exchange decided last
  std::unique_ptr<PostedGather> posted_;  // pipelined only
  std::optional<Sent> in_flight_;         // posted, not collected
};

}  // namespace resurgo::autockpt
