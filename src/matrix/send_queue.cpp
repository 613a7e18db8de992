#include "matrix/send_queue.h"

#include <algorithm>

#include "matrix/mpi_call.h"

namespace resurgo {

SendQueue::~SendQueue() {
  for (std::vector<std::uint64_t>& buffer : buffers_) {
    static_cast<void>(new std::vector<std::uint64_t>(std::move(buffer)));  // leaked: an active send may read it
  }
}

void SendQueue::post(int target, std::vector<std::uint64_t> message) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_UINT64_T, target, tag_, comm_, &request),
            "MPI_Isend");
  bytes_in_flight_ += message.size() * sizeof(std::uint64_t);
  requests_.push_back(request);
  targets_.push_back(target);
  buffers_.push_back(std::move(message));
}

std::vector<int> SendQueue::targets() const {
  std::vector<int> ranks = targets_;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<std::uint64_t> SendQueue::spare() {
  if (spares_.empty()) return {};
  std::vector<std::uint64_t> buffer = std::move(spares_.back());
  spares_.pop_back();
  spare_bytes_ -= buffer.capacity() * sizeof(std::uint64_t);
  buffer.clear();
  return buffer;
}

void SendQueue::keep(std::vector<std::uint64_t> buffer) {
  const std::size_t bytes = buffer.capacity() * sizeof(std::uint64_t);
  if (bytes == 0 || spare_bytes_ + bytes > spare_limit_) return;  // freed here
  spare_bytes_ += bytes;
  spares_.push_back(std::move(buffer));
}

bool SendQueue::test() {
  if (requests_.empty()) return false;
  int completed = 0;
  std::vector<int> indices(requests_.size());
  check_mpi(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &completed, indices.data(),
                         MPI_STATUSES_IGNORE),
            "MPI_Testsome");
  if (completed <= 0) return false;  // 0, or MPI_UNDEFINED when none was active
  for (int i = 0; i < completed; ++i) {
    std::vector<std::uint64_t>& buffer = buffers_[static_cast<std::size_t>(indices[static_cast<std::size_t>(i)])];
    bytes_in_flight_ -= buffer.size() * sizeof(std::uint64_t);
    keep(std::move(buffer));
    buffer = {};
  }
  // Completed requests are MPI_REQUEST_NULL now: drop them with their buffers.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    // Never onto itself: a vector moved onto itself frees its buffer (libstdc++),
    // and this send may still be reading it.
    if (kept != i) {
      requests_[kept] = requests_[i];
      targets_[kept] = targets_[i];
      buffers_[kept] = std::move(buffers_[i]);
    }
    ++kept;
  }
  requests_.resize(kept);
  targets_.resize(kept);
  buffers_.resize(kept);
  return true;
}

}  // namespace resurgo
