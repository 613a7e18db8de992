// Comm: what the store needs from the job it runs in (DESIGN.md, "Data flow
// and modules"): its rank, the job's size, agreement on a value, a barrier
// and point-to-point bytes. SelfComm serves a process running alone (or one
// rank of a job whose ranks checkpoint independently): its rank comes from
// the launcher's environment, and collectives are trivial. An MPI Comm plugs
// in here.
#pragma once

#include <cstddef>
#include <memory>

namespace resurgo {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The smallest `value` over every rank.
  virtual long allreduce_min(long value) = 0;
  virtual void barrier() = 0;
  virtual void send(int to_rank, const void* data, std::size_t bytes) = 0;
  virtual void receive(int from_rank, void* data, std::size_t bytes) = 0;
};

class Store;
// The communicator of `store`'s job: the layers above the store (auto,
// matrix) agree through it.
Comm& comm_of(Store& store);

// The rank named by the launcher (OMPI_COMM_WORLD_RANK, PMI_RANK,
// PMIX_RANK, SLURM_PROCID), 0 when run alone; a job of one.
std::unique_ptr<Comm> self_comm();

}  // namespace resurgo
