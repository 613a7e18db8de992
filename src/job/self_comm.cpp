#include <algorithm>
#include <cstdlib>
#include <string>

#include "job/self_comm.h"
#include "resurgo/errors.hpp"

namespace resurgo {

// Gathers at rank 0 over point-to-point messages, then sends the list back.
std::vector<long> Comm::allgather(long value, double) {
  std::vector<long> values(static_cast<std::size_t>(size()));
  if (rank() == 0) {
    values[0] = value;
    for (int from = 1; from < size(); ++from) receive(from, &values[static_cast<std::size_t>(from)], sizeof(long));
    for (int to = 1; to < size(); ++to) send(to, values.data(), values.size() * sizeof(long));
  } else {
    send(0, &value, sizeof value);
    receive(0, values.data(), values.size() * sizeof(long));
  }
  return values;
}

namespace {

int launcher_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) return std::max(0, std::atoi(value));
  }
  return 0;
}

class SelfComm final : public Comm {
 public:
  explicit SelfComm(int rank) : rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 1; }
  long allreduce_min(long value) override { return value; }
  void barrier() override {}
  void send(int to_rank, const void*, std::size_t) override { refuse(to_rank); }
  void receive(int from_rank, void*, std::size_t) override { refuse(from_rank); }
  void exchange(int to_rank, const void*, std::size_t, int, void*, std::size_t) override { refuse(to_rank); }
  std::unique_ptr<Comm> duplicate() override { return std::make_unique<SelfComm>(rank_); }
  std::vector<long> allgather(long value, double) override { return {value}; }

 private:
  [[noreturn]] void refuse(int other) const {
    throw InvalidArgumentError("rank " + std::to_string(rank_) + " runs without a communicator; it cannot exchange "
                               "bytes with rank " + std::to_string(other) + " (open the store with an MPI communicator)");
  }
  int rank_;
};

}  // namespace

std::unique_ptr<Comm> self_comm() { return std::make_unique<SelfComm>(launcher_rank()); }

}  // namespace resurgo
