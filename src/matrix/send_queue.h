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
  SendQueue(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {}
  // Sends still in flight (after an error) keep their buffers: MPI may
  // still read them.
  ~SendQueue();
  SendQueue(const SendQueue&) = delete;
  SendQueue& operator=(const SendQueue&) = delete;

  void post(int target, std::vector<std::uint64_t> message);
  // Releases the buffers of the sends that completed; whether any had.
  bool test();

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
};

}  // namespace resurgo
