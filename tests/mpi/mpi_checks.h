// What the MPI test programs share: the rank and size of MPI_COMM_WORLD, a
// check that names the rank and counts what failed, and the end of main():
// every rank exits 1 when a check failed on any rank.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>

namespace resurgo::mpi_checks {

inline int failures = 0;

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline void check(bool condition, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "rank %d: check failed: %s\n", world_rank(), what.c_str());
  ++failures;
}

// Finalizes MPI; the exit status of every rank: 1 when a check failed on
// any of them.
inline int finish() {
  int any_failed = 0;
  MPI_Allreduce(&failures, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed == 0 ? 0 : 1;
}

}  // namespace resurgo::mpi_checks
