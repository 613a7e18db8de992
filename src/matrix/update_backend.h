// How updates travel to their owners: the seam between the ConvergentMatrix
// facade and its two backends (MatrixBackend::kMessages, kRma). The backend
// owns the local array because the RMA one allocates it with its window.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "matrix/block_cyclic.h"
#include "matrix/polite_wait.h"
#include "matrix/update_bins.h"
#include "resurgo/matrix.hpp"

namespace resurgo {

// Message tags on the matrix's own communicator.
inline constexpr int kBinTag = 1;         // a bin (bin_message.h)
inline constexpr int kRendezvousTag = 2;  // a convergence's rendezvous (rendezvous.h)
inline constexpr int kSlabTag = 3;        // a global-layout file's elements (file_slabs.h)

// What every part of one matrix knows about it. options.progress is
// resolved: kThread or kInline.
struct MatrixContext {
  MPI_Comm comm = MPI_COMM_NULL;  // the matrix's own duplicate
  int rank = 0;
  int size = 1;
  BlockCyclic layout;
  MatrixOptions options;
};

// What a convergence (convergence.h) asks of a backend.
class ConvergeHooks {
 public:
  virtual ~ConvergeHooks() = default;

  // Applies what has arrived and sends what is queued, without waiting;
  // whether anything happened. Any thread (the progress thread's loop).
  virtual bool progress() = 0;
  // progress(), but a bin from rank r is taken only while fewer than
  // count_from(r) of r's bins are applied here (asked once one has come):
  // the others are bins of r's next updates, left for later. An empty
  // count_from takes every bin.
  virtual bool progress_owed(const std::function<std::uint64_t(int)>& count_from) = 0;
  // Whether every update issued so far has all its bins sent.
  virtual bool flushed() = 0;
  // Bins sent to each rank since construction.
  virtual std::vector<std::uint64_t> bins_sent() = 0;
  // Whether `expected[r]` bins from each rank r are applied here and this
  // rank's sends completed.
  virtual bool settled(std::span<const std::uint64_t> expected) = 0;
  // Whom flushed() (with no `expected`) or settled() still waits for, in
  // words: "bins to rank 2 are not received yet".
  virtual std::string waiting_for(std::span<const std::uint64_t> expected) = 0;
  // Before the rendezvous and at the end: makes this rank's array and the
  // other ranks' writes into it agree (RMA's MPI_Win_sync).
  virtual void synchronize() {}
};

template <typename T>
class UpdateBackend : public ConvergeHooks {
 public:
  // This rank's local array, of BlockCyclic::storage_elements.
  virtual T* storage() = 0;
  // Takes a checked update, on the application thread, counting into
  // `stats` the time it waited under max_in_flight_bytes. A wait past
  // `deadline` throws StateError (from `call`, naming the ranks waited
  // for), the update not taken.
  virtual void update(const char* call, const UpdateSlice<T>& update, MatrixStats& stats,
                      const Deadline& deadline) = 0;
  // Adds to `stats` what the backend counted, on whichever thread sent and
  // received, since construction or clear_counters(): elements_sent,
  // elements_local, bytes_sent, bins_received and binning_seconds.
  virtual void add_counters(MatrixStats& stats) const = 0;
  virtual void clear_counters() = 0;
};

}  // namespace resurgo
