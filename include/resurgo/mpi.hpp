// Resurgo for MPI jobs (C++): the communicator a Store of an MPI job opens
// with. Include it only in code compiled with MPI (mpicxx, or the MPI
// target of your build system); libresurgo provides it when it was built
// with MPI found (docs/mpi.md).
//
//   resurgo::Store store("heat", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
//
// Every rank of `comm` opens the store, protects its regions and calls
// checkpoint(v), wait, latest, restart and close together (docs/mpi.md).
#pragma once

#include <mpi.h>

#include <memory>

#include "resurgo/comm.hpp"

namespace resurgo {

// A Comm over a duplicate of `comm` (the store's messages never match the
// application's). MPI must be initialized; the store's background thread
// calls MPI only when MPI_Query_thread says MPI_THREAD_MULTIPLE. The node of
// a rank comes from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED); a store's
// configuration may fake nodes instead (mpi.ranks_per_node), so that tests
// and benchmarks run several nodes on one machine. Collective.
std::shared_ptr<Comm> mpi_comm(MPI_Comm comm);

}  // namespace resurgo
