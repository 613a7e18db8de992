// The paper's MPI-3 RMA comparison (section IV-B): one window over the
// local arrays; per update and target, MPI_Accumulate(MPI_SUM) of an indexed
// datatype under an exclusive lock of the target, so each bin is atomic at
// its owner (the target itself never takes part). Displacements are the
// window's 32-bit ints: a local array of more than INT_MAX elements is
// refused, the limit the paper met.
//
// Each accumulate has completed when its unlock returns, so nothing stays
// in flight and MatrixOptions::max_in_flight_bytes has nothing to cap.
//
// Commit: a barrier therefore means every accumulate is in place; a self
// lock with MPI_Win_sync on each side of it publishes this rank's own
// writes before others accumulate again and makes theirs visible here.
#pragma once

#include <mpi.h>

#include "matrix/update_backend.h"

namespace resurgo {

template <typename T>
class RmaBackend final : public UpdateBackend<T> {
 public:
  // Collective (MPI_Win_allocate). InvalidArgumentError, on every rank, when
  // some rank's local array exceeds INT_MAX elements.
  explicit RmaBackend(const MatrixContext& context);
  // Collective (MPI_Win_free).
  ~RmaBackend() override;
  RmaBackend(const RmaBackend&) = delete;
  RmaBackend& operator=(const RmaBackend&) = delete;

  T* storage() override { return base_; }
  void update(const UpdateSlice<T>& update, const UpdateBins& bins, std::span<const int> targets,
              MatrixStats& stats) override;
  // Drives MPI's progress engine (an MPI_Iprobe), for RMA implementations
  // whose targets must progress; nothing arrives to apply.
  bool poll() override;
  bool progress() override { return poll(); }
  void converge() override;
  // The target of an accumulate never sees it: 0.
  std::uint64_t bins_received() const override { return 0; }

 private:
  void synchronize_self();

  const MatrixContext& context_;
  MPI_Win window_ = MPI_WIN_NULL;
  T* base_ = nullptr;
};

}  // namespace resurgo
