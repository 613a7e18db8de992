// The communicator of a store opened without one (the Comm seam,
// include/resurgo/comm.hpp).
#pragma once

#include <memory>

#include "resurgo/comm.hpp"

namespace resurgo {

// The rank named by the launcher (OMPI_COMM_WORLD_RANK, PMI_RANK,
// PMIX_RANK, SLURM_PROCID), 0 when run alone; a job of one. Its ranks
// checkpoint independently: each is a job of its own.
std::unique_ptr<Comm> self_comm();

}  // namespace resurgo
