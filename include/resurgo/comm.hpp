// Comm: what a store needs from the job it runs in (DESIGN.md, "Data flow
// and modules"): its rank and node, the job's size, agreement on values, a
// barrier and point-to-point bytes. A process running alone gets a job of
// one; resurgo/mpi.hpp makes one from an MPI communicator. Layers above the
// store (auto, matrix) and tests (a job of threads) implement or use it too.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace resurgo {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The smallest `value` over every rank.
  virtual long allreduce_min(long value) = 0;
  virtual void barrier() = 0;
  virtual void send(int to_rank, const void* data, std::size_t bytes) = 0;
  virtual void receive(int from_rank, void* data, std::size_t bytes) = 0;
  // Sends `out` to `to_rank` while receiving `in` from `from_rank` (a ring
  // shift: every rank sends and receives at once, so it must not deadlock
  // where sends wait for their receiver).
  virtual void exchange(int to_rank, const void* out, std::size_t out_bytes, int from_rank, void* in,
                        std::size_t in_bytes) = 0;

  // The node this rank runs on, numbered from 0: ranks of one node share its
  // node-local directory (L2) and are lost together.
  virtual int node() const { return 0; }
  // Whether a thread other than the application's may call this
  // communicator while the application calls it (MPI_THREAD_MULTIPLE).
  virtual bool threads_may_call() const { return false; }
  // A communicator of the same ranks whose messages never match this one's:
  // the store's background thread talks on it. Collective.
  virtual std::unique_ptr<Comm> duplicate() = 0;
  // Every rank's `value`, indexed by rank. With `timeout_seconds` > 0, a
  // rank that has not called by then makes it throw StateError naming such
  // ranks, on every rank that called. The default implementation has
  // no timeout: it gathers at rank 0 and sends the list back.
  virtual std::vector<long> allgather(long value, double timeout_seconds);
};

}  // namespace resurgo
