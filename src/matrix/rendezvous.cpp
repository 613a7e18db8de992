#include "matrix/rendezvous.h"

#include <algorithm>
#include <limits>

#include "matrix/mpi_call.h"

namespace resurgo {

namespace {

bool all_null(const std::vector<MPI_Request>& requests) {
  return std::all_of(requests.begin(), requests.end(), [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
}

// Completes what did (MPI_Testsome sets those to MPI_REQUEST_NULL).
void test_some(std::vector<MPI_Request>& requests) {
  if (all_null(requests)) return;
  int completed = 0;
  std::vector<int> indices(requests.size());
  check_mpi(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed, indices.data(),
                         MPI_STATUSES_IGNORE),
            "MPI_Testsome");
}

}  // namespace

Rendezvous::Rendezvous(MPI_Comm comm, int tag, int rank, std::int64_t code, std::span<const std::uint64_t> counts)
    : rank_(rank),
      code_(code),
      buffers_(std::make_unique<Buffers>(
          Buffers{std::vector<Words>(counts.size()), std::vector<Words>(counts.size())})),
      sends_(counts.size(), MPI_REQUEST_NULL),
      receives_(counts.size(), MPI_REQUEST_NULL) {
  for (std::size_t other = 0; other < counts.size(); ++other) {
    if (static_cast<int>(other) == rank) continue;
    const int peer = static_cast<int>(other);
    buffers_->sent[other] = {static_cast<std::uint64_t>(code), counts[other]};
    check_mpi(MPI_Irecv(buffers_->received[other].data(), 2, MPI_UINT64_T, peer, tag, comm, &receives_[other]),
              "MPI_Irecv");
    check_mpi(MPI_Isend(buffers_->sent[other].data(), 2, MPI_UINT64_T, peer, tag, comm, &sends_[other]), "MPI_Isend");
  }
}

Rendezvous::~Rendezvous() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Request& receive : receives_) {
    if (receive == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&receive);
    MPI_Wait(&receive, MPI_STATUS_IGNORE);
  }
  if (all_null(sends_)) return;
  for (MPI_Request& send : sends_) {
    if (send != MPI_REQUEST_NULL) MPI_Request_free(&send);
  }
  static_cast<void>(buffers_.release());  // leaked: a send may still read it
}

bool Rendezvous::test() {
  test_some(receives_);
  test_some(sends_);
  return all_null(receives_) && all_null(sends_);
}

std::vector<int> Rendezvous::missing() const {
  std::vector<int> ranks;
  for (std::size_t other = 0; other < receives_.size(); ++other) {
    if (receives_[other] != MPI_REQUEST_NULL) ranks.push_back(static_cast<int>(other));
  }
  return ranks;
}

std::uint64_t Rendezvous::count_from(int rank) const {
  const auto other = static_cast<std::size_t>(rank);
  if (rank == rank_) return 0;
  return receives_[other] == MPI_REQUEST_NULL ? buffers_->received[other][1]
                                              : std::numeric_limits<std::uint64_t>::max();
}

std::vector<std::uint64_t> Rendezvous::counts() const {
  std::vector<std::uint64_t> counts(receives_.size());
  for (std::size_t other = 0; other < counts.size(); ++other) counts[other] = count_from(static_cast<int>(other));
  return counts;
}

Rendezvous::CodeRange Rendezvous::codes() const {
  CodeRange range{code_, code_};
  for (std::size_t other = 0; other < receives_.size(); ++other) {
    if (static_cast<int>(other) == rank_) continue;
    const auto code = static_cast<std::int64_t>(buffers_->received[other][0]);
    range.smallest = std::min(range.smallest, code);
    range.largest = std::max(range.largest, code);
  }
  return range;
}

}  // namespace resurgo
