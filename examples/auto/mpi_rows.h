// What the MPI mini-apps of examples/auto share: the job's size and this
// rank, and the rows of a global grid a rank holds (blocks of rows, the
// first `total % ranks` ranks one row more).
#pragma once

#include <mpi.h>

#include <algorithm>

inline int world(int (*query)(MPI_Comm, int*)) {
  int value = 0;
  query(MPI_COMM_WORLD, &value);
  return value;
}

struct RowBlock {
  int rows = 0;   // this rank's
  int first = 0;  // its first row in the global grid
};

inline RowBlock row_block(int total, int rank, int ranks) {
  return {total / ranks + (rank < total % ranks ? 1 : 0), rank * (total / ranks) + std::min(rank, total % ranks)};
}
