// What the MPI test programs share: the rank and size of MPI_COMM_WORLD, a
// check that names the rank and counts what passed and failed, a check of
// an expected error, and the end of main(): every rank exits 1 when a check
// failed on any rank.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace resurgo::mpi_checks {

inline int passes = 0;
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
  if (condition) {
    ++passes;
    return;
  }
  std::fprintf(stderr, "rank %d: check failed: %s\n", world_rank(), what.c_str());
  ++failures;
}

// Runs `call`, which must throw `Error` with a message holding each of
// `needles`.
template <typename Error>
void expect_error(const std::function<void()>& call, const std::vector<std::string>& needles, const std::string& what) {
  try {
    call();
    check(false, what + ": no error");
  } catch (const Error& error) {
    const std::string message = error.what();
    bool all = true;
    for (const std::string& needle : needles) all = all && message.find(needle) != std::string::npos;
    check(all, what + ": the message names what failed: '" + message + "'");
  } catch (const std::exception& error) {
    check(false, what + ": another error: " + error.what());
  }
}

// As finish(), after rank 0 printed "PROGRAM MODE on N ranks: P passed, F
// failed" (the counts summed over the ranks).
inline int finish_counted(const std::string& program, const std::string& mode) {
  int counts[2] = {passes, failures};
  int totals[2] = {0, 0};
  MPI_Allreduce(counts, totals, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::printf("%s %s on %d ranks: %d passed, %d failed\n", program.c_str(), mode.c_str(), world_size(), totals[0],
                totals[1]);
  }
  MPI_Finalize();
  return totals[1] == 0 ? 0 : 1;
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
