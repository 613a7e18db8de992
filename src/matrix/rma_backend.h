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
// Converging (convergence.h): once every rank has come to the rendezvous,
// every accumulate issued before is in place; synchronize() (a self lock
// with MPI_Win_sync) before it publishes this rank's own writes before
// others accumulate again, and after it makes theirs visible here. Nothing
// is queued or counted: the rendezvous carries zero counts, only naming the
// ranks that have not come.
#pragma once

#include <mpi.h>

#include "matrix/target_order.h"
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
  // Bins the update and accumulates each bin from the calling thread (the
  // paper's comparison): nothing is queued, so nothing waits for room.
  void update(const char* call, const UpdateSlice<T>& update, MatrixStats& stats, const Deadline& deadline) override;
  // Drives MPI's progress engine (an MPI_Iprobe), for RMA implementations
  // whose targets must progress; nothing arrives to apply.
  bool progress() override;
  bool progress_owed(const std::function<std::uint64_t(int)>&) override { return progress(); }
  bool flushed() override { return true; }
  std::vector<std::uint64_t> bins_sent() override {
    return std::vector<std::uint64_t>(static_cast<std::size_t>(context_.size), 0);
  }
  bool settled(std::span<const std::uint64_t>) override { return true; }
  std::string waiting_for(std::span<const std::uint64_t>) override { return {}; }
  void synchronize() override;
  // bins_received stays 0: the target of an accumulate never sees it.
  void add_counters(MatrixStats& stats) const override;
  void clear_counters() override { counters_ = MatrixStats{}; }

 private:
  const MatrixContext& context_;
  MPI_Win window_ = MPI_WIN_NULL;
  T* base_ = nullptr;
  TargetOrder order_;
  MatrixStats counters_;  // elements_sent, elements_local, bytes_sent, binning_seconds
};

}  // namespace resurgo
