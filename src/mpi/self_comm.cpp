#include <algorithm>
#include <cstdlib>
#include <string>

#include "mpi/comm.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

int launcher_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) return std::max(0, std::atoi(value));
  }
  return 0;
}

class SelfComm final : public Comm {
 public:
  SelfComm() : rank_(launcher_rank()) {}
  int rank() const override { return rank_; }
  int size() const override { return 1; }
  long allreduce_min(long value) override { return value; }
  void barrier() override {}
  void send(int to_rank, const void*, std::size_t) override { refuse(to_rank); }
  void receive(int from_rank, void*, std::size_t) override { refuse(from_rank); }

 private:
  [[noreturn]] void refuse(int other) const {
    throw InvalidArgumentError("rank " + std::to_string(rank_) + " runs without a communicator; it cannot exchange "
                               "bytes with rank " + std::to_string(other) + " (open the store with an MPI communicator)");
  }
  int rank_;
};

}  // namespace

std::unique_ptr<Comm> self_comm() { return std::make_unique<SelfComm>(); }

}  // namespace resurgo
