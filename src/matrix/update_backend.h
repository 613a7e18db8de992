// How updates travel to their owners: the seam between the ConvergentMatrix
// facade and its two backends (MatrixBackend::kMessages, kRma). The backend
// owns the local array because the RMA one allocates it with its window.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>

#include "matrix/block_cyclic.h"
#include "matrix/update_bins.h"
#include "resurgo/matrix.hpp"

namespace resurgo {

// What every part of one matrix knows about it.
struct MatrixContext {
  MPI_Comm comm = MPI_COMM_NULL;  // the matrix's own duplicate
  int rank = 0;
  int size = 1;
  BlockCyclic layout;
  MatrixOptions options;
};

template <typename T>
class UpdateBackend {
 public:
  virtual ~UpdateBackend() = default;

  // This rank's local array, of BlockCyclic::storage_elements.
  virtual T* storage() = 0;
  // Sends (or applies here) the bins of a checked update, visiting the
  // targets in the order `targets` gives (the facade bins and shuffles once
  // for either backend), counting into `stats`. Application thread.
  virtual void update(const UpdateSlice<T>& update, const UpdateBins& bins, std::span<const int> targets,
                      MatrixStats& stats) = 0;
  // Applies what has arrived, without waiting; whether anything had. Any
  // thread (the progress thread's loop).
  virtual bool poll() = 0;
  // poll(), and completes finished sends; whether anything happened.
  // Application thread.
  virtual bool progress() = 0;
  // Collective: on return every update any rank issued before is in its
  // owner's local array. This rank may then read and write its array
  // directly until some rank issues its next update (which may arrive at
  // once); writes are seen by bins applied after the next converge().
  virtual void converge() = 0;
  // Bins from other ranks applied here since construction.
  virtual std::uint64_t bins_received() const = 0;
};

}  // namespace resurgo
