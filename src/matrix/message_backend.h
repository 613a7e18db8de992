// The paper's design over MPI point-to-point: each update is binned by
// owner and each bin sent at once with MPI_Isend (bin_message.h gives its
// format); the owner receives it (MPI_Iprobe + MPI_Recv) and applies it as a
// whole under one mutex, so every update is atomic at its owner with respect
// to every other. A bin for this rank is applied at once, never sent.
//
// Commit: each rank counts the bins it sent to each rank since
// construction; MPI_Ireduce_scatter_block(SUM) of those counts tells each
// rank how many it must have received in all; it applies bins until it has
// and its own sends completed, then a barrier holds every rank until all
// have. Every wait there tests and sleeps (polite_wait.h) instead of
// spinning in a blocking collective.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "matrix/send_queue.h"
#include "matrix/update_backend.h"

namespace resurgo {

template <typename T>
class MessageBackend final : public UpdateBackend<T> {
 public:
  explicit MessageBackend(const MatrixContext& context);

  T* storage() override { return storage_.data(); }
  void update(const UpdateSlice<T>& update, const UpdateBins& bins, std::span<const int> targets,
              MatrixStats& stats) override;
  bool poll() override;
  bool progress() override;
  void converge() override;
  std::uint64_t bins_received() const override { return bins_received_; }

 private:
  // Until this rank's sends in flight leave room for `bytes` under the cap
  // (or none is in flight: a larger bin goes alone), applying what arrives.
  void wait_for_room(std::size_t bytes, MatrixStats& stats);
  // progress() until `done`, sleeping (Backoff) while nothing happens.
  void progress_until(const std::function<bool()>& done);
  bool receive_one();
  void apply(std::span<const std::uint64_t> message);

  const MatrixContext& context_;
  std::vector<T> storage_;
  std::mutex storage_mutex_;  // held while one bin is applied
  std::mutex receive_mutex_;  // one thread at a time from MPI_Iprobe to its MPI_Recv
  SendQueue sends_;
  std::vector<std::uint64_t> bins_sent_to_;  // per rank, since construction
  std::atomic<std::uint64_t> bins_received_{0};
};

}  // namespace resurgo
