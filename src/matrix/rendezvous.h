// The meeting that opens every convergence (commit, reset, restart, free):
// each rank sends every other rank two words, the collective call's code
// (collective_check.h) and the number of bins it has sent that rank since
// construction, and receives the same from each. Point to point rather than
// a reduction, so that a rank still waiting knows whom it waits for: a
// commit that times out names the ranks that have not come. The counts tell
// each rank how many bins it must have applied from each; the codes let the
// collective check compare the ranks' calls.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace resurgo {

class Rendezvous {
 public:
  // Posts the sends and the receives. `counts` holds one count per rank
  // (this rank's own is not sent).
  Rendezvous(MPI_Comm comm, int tag, int rank, std::int64_t code, std::span<const std::uint64_t> counts);
  // Receives still pending are cancelled; sends still pending keep their
  // buffers (leaked: MPI may still read them).
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Whether every rank's words arrived and this rank's went out.
  bool test();
  // The ranks not heard from yet, ascending.
  std::vector<int> missing() const;
  // The bins `rank` sent this one: 0 for itself, and the maximum for a rank
  // not heard from yet (it may owe any number); counts() for every rank.
  std::uint64_t count_from(int rank) const;
  std::vector<std::uint64_t> counts() const;
  // Once test() said so: the extremes of all ranks' codes.
  struct CodeRange {
    std::int64_t smallest;
    std::int64_t largest;
  };
  CodeRange codes() const;

 private:
  using Words = std::array<std::uint64_t, 2>;  // code, count
  struct Buffers {
    std::vector<Words> sent;
    std::vector<Words> received;
  };

  int rank_;
  std::int64_t code_;
  std::unique_ptr<Buffers> buffers_;
  std::vector<MPI_Request> sends_;     // per rank; MPI_REQUEST_NULL once complete, and for this rank
  std::vector<MPI_Request> receives_;  // the same
};

}  // namespace resurgo
