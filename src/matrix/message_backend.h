// The paper's design over MPI point-to-point. update() copies the update
// into a bounded queue (update_queue.h) and returns; the progress thread
// (without one, update(), progress() and commit() on the application
// thread) takes the queue in order, bins each update by owner, sends each
// bin with MPI_Isend (bin_message.h gives its format; a symmetric update's
// bins carry one triangle) and adds the bin for this rank itself. Owners
// receive bins (MPI_Iprobe + MPI_Recv) and apply each as a whole under one
// mutex, so every update is atomic at its owner with respect to every other.
//
// Memory: the queue holds at most max_in_flight_bytes of copied updates,
// and the sends in flight at most as much again; update() waits only when
// the queue is full. Order: one thread at a time sends (the send mutex), in
// queue order, so the bins from this rank reach each owner in the order of
// the updates, as MPI keeps the order of messages between two ranks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "matrix/bin_message.h"
#include "matrix/scratch_buffer.h"
#include "matrix/send_queue.h"
#include "matrix/target_order.h"
#include "matrix/update_backend.h"
#include "matrix/update_queue.h"

namespace resurgo {

template <typename T>
class MessageBackend final : public UpdateBackend<T> {
 public:
  explicit MessageBackend(const MatrixContext& context);

  T* storage() override { return storage_.data(); }
  void update(const char* call, const UpdateSlice<T>& update, MatrixStats& stats, const Deadline& deadline) override;
  bool progress() override { return progress_owed({}); }
  bool progress_owed(const std::function<std::uint64_t(int)>& count_from) override;
  bool flushed() override { return queue_.empty(); }
  std::vector<std::uint64_t> bins_sent() override;
  bool settled(std::span<const std::uint64_t> expected) override;
  std::string waiting_for(std::span<const std::uint64_t> expected) override;
  void add_counters(MatrixStats& stats) const override;
  void clear_counters() override;

 private:
  // The queue's front while it is sent: its bins, its targets in the order
  // drawn for it, and how far it got.
  struct Outgoing {
    // Bins `queued` for its targets, in `order`, this rank's own last.
    Outgoing(const QueuedUpdate<T>& queued, const BlockCyclic& layout, TargetOrder& order, int rank);

    UpdateSlice<T> update;
    UpdateBins bins;
    std::vector<int> targets;
    std::size_t next = 0;  // targets[next] gets the next bin
    EncodedBin bin;        // targets[next]'s once encoded (no words yet: not encoded)
  };

  // Sends the queue's bins in order as far as the cap lets it; whether it
  // sent or added anything. Does nothing if another thread is at it.
  bool send_queued();
  // The next bin of `outgoing`; false when there is no room under the cap.
  bool send_next_bin(Outgoing& outgoing);
  // Takes one bin that has arrived: from any rank, or with `count_from`
  // (progress_owed) from a rank that owes one; whether it did.
  bool receive_next(const std::function<std::uint64_t(int)>& count_from);
  // Receives the bin `status` probed, and applies it.
  void receive(const MPI_Status& status);
  // Adds a bin into the local array; `source`, unless this rank, is counted.
  void apply(std::span<const std::uint64_t> message, int source);

  const MatrixContext& context_;
  // On transparent huge pages where offered: bins add all over it, and a
  // TLB miss per element (4 KiB pages) costs more than the addition.
  ScratchBuffer<T> storage_;
  mutable std::mutex storage_mutex_;         // held while one bin is applied; guards applied_from_
  std::vector<std::uint64_t> applied_from_;  // bins of each rank applied here, since construction
  std::uint64_t applied_at_clear_ = 0;
  // One thread at a time from MPI_Iprobe to the bin applied; guards received_.
  std::mutex receive_mutex_;
  std::vector<std::uint64_t> received_;  // the bin being received: as large as the largest yet, reused
  UpdateQueue<T> queue_;
  mutable std::mutex send_mutex_;  // one thread at a time sends; guards what follows
  std::optional<Outgoing> outgoing_;
  SendQueue sends_;
  std::vector<std::uint64_t> sent_to_;  // bins per rank, since construction
  TargetOrder order_;
  MatrixStats counters_;  // elements_sent, elements_local, bytes_sent, binning_seconds
};

}  // namespace resurgo
