// This rank's bins on their way: MPI_Isend may read a buffer until its send
// completes, so each buffer lives here until MPI_Testsome says it has. The
// bytes still in flight are what MatrixOptions::max_in_flight_bytes caps.
// Used by one thread at a time (MessageBackend's send mutex).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace resurgo {

class SendQueue {
 public:
  SendQueue(MPI_Comm comm, int tag, std::size_t cap) : comm_(comm), tag_(tag), spare_limit_(cap / 4) {}
  // Sends still in flight (after an error) keep their buffers: MPI may
  // still read them.
  ~SendQueue();
  SendQueue(const SendQueue&) = delete;
  SendQueue& operator=(const SendQueue&) = delete;

  void post(int target, std::vector<std::uint64_t> message);
  // Releases the buffers of the sends that completed (keeping some as
  // spares); whether any had.
  bool test();
  // A buffer to pack the next bin into (empty, with the room of an earlier
  // one where a spare is left), and one to keep when done with it.
  std::vector<std::uint64_t> spare();
  void keep(std::vector<std::uint64_t> buffer);

  bool empty() const { return requests_.empty(); }
  std::size_t bytes_in_flight() const { return bytes_in_flight_; }
  // The ranks of the sends in flight, ascending, each once.
  std::vector<int> targets() const;

 private:
  MPI_Comm comm_;
  int tag_;
  std::vector<MPI_Request> requests_;
  std::vector<int> targets_;                         // targets_[i] is where requests_[i] sends
  std::vector<std::vector<std::uint64_t>> buffers_;  // buffers_[i] is what requests_[i] sends
  std::size_t bytes_in_flight_ = 0;
  std::size_t spare_limit_;
  std::size_t spare_bytes_ = 0;  // the spares' capacity
  std::vector<std::vector<std::uint64_t>> spares_;
};

}  // namespace resurgo
