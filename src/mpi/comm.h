// The store's side of the Comm seam (include/resurgo/comm.hpp): the job of
// one a process running alone gets, and the communicator of a store for the
// layers above it.
#pragma once

#include <memory>

#include "resurgo/comm.hpp"

namespace resurgo {

class Store;
// The communicator of `store`'s job: the layers above the store (auto,
// matrix) agree through it.
Comm& comm_of(Store& store);

// The rank named by the launcher (OMPI_COMM_WORLD_RANK, PMI_RANK,
// PMIX_RANK, SLURM_PROCID), 0 when run alone; a job of one. Its ranks
// checkpoint independently: each is a job of its own.
std::unique_ptr<Comm> self_comm();

}  // namespace resurgo
