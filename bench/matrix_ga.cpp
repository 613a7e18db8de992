// matrix_ga: the Global Arrays row of bench/matrix.py ("ga"): the workload of
// bench/matrix_workload.h accumulated into a Global Array. Started by mpirun
// -np P; rank 0 prints one JSON line ("kind": "run").
//
//   NGA_Create64(C_FLOAT, {N, N}) with GA's regular distribution (a 2-D grid
//   of contiguous patches GA chooses; GA's strided calls do not take its
//   block-cyclic arrays). Per update, for each row i of the upper
//   triangle, NGA_Strided_acc64 of the 1 x (n - i) strided patch
//   A[ix[i], ix[i..]] (skip {1, stride}: the index set is strided, so a
//   plain NGA_Acc of a rectangle would add to the wrong elements), alpha 1;
//   one-sided and atomic per element like MPI_Accumulate. At the end
//   GA_Sync() (a fence of every rank's accumulates and a barrier).
//
// Debian's libglobalarrays-dev 5.8 ships libga-openmpi.a built on ARMCI but
// no ARMCI library (libarmci-openmpi comes from ARMCI-MPI, libarmci-mpi-dev,
// which it does not depend on): bench/CMakeLists.txt links this program
// only where an ARMCI library is found, and compiles it otherwise.
#include <mpi.h>
#include <ga.h>
#include <macdecls.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "matrix_workload.h"

namespace {

using namespace matrix_bench;

void run(const Workload& w) {
  const Options& opt = w.opt;
  std::int64_t dims[2] = {opt.size, opt.size};
  char name[] = "hessian";
  const int array = NGA_Create64(C_FLOAT, 2, dims, name, nullptr);
  if (array == 0) throw std::runtime_error("NGA_Create64 failed");
  GA_Zero(array);
  std::int64_t lo[2] = {0, 0}, hi[2] = {-1, -1};
  NGA_Distribution64(array, GA_Nodeid(), lo, hi);
  float* data = nullptr;
  std::int64_t ld[1] = {1};
  const bool owns = hi[0] >= lo[0] && hi[1] >= lo[1];
  if (owns) NGA_Access64(array, lo, hi, &data, ld);
  // Touch the local patch before timing, as the other rows' are.
  if (owns) {
    for (std::int64_t r = 0; r <= hi[0] - lo[0]; ++r) {
      for (std::int64_t c = 0; c <= hi[1] - lo[1]; ++c) data[r * ld[0] + c] = 0;
    }
  }
  float one = 1;
  const Timings t = timed_run(
      w,
      [&](const Update& up) {
        const auto n = static_cast<std::int64_t>(up.ix.size());
        std::int64_t skip[2] = {1, up.span.stride};
        for (std::int64_t i = 0; i < n; ++i) {
          std::int64_t patch_lo[2] = {up.ix[static_cast<std::size_t>(i)], up.ix[static_cast<std::size_t>(i)]};
          std::int64_t patch_hi[2] = {up.ix[static_cast<std::size_t>(i)], up.ix[static_cast<std::size_t>(n - 1)]};
          std::int64_t patch_ld[1] = {n - i};
          NGA_Strided_acc64(array, patch_lo, patch_hi, skip, const_cast<float*>(up.values.data() + i * n + i),
                            patch_ld, &one);
        }
      },
      [] { GA_Sync(); });
  LocalView view;
  view.row_major = true;
  view.ld = ld[0];
  if (owns) {
    for (std::int64_t r = lo[0]; r <= hi[0]; ++r) view.rows.push_back(r);
    for (std::int64_t c = lo[1]; c <= hi[1]; ++c) view.cols.push_back(c);
  }
  const double local_bytes = owns ? static_cast<double>((hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1)) * sizeof(float) : 0;
  auto fields = common_fields(t, local_bytes);
  const Check check = verify(w, data, view);
  if (owns) NGA_Release64(array, lo, hi);
  int grid[2] = {0, 0};
  GA_Nblock(array, grid);
  print_run(w, "ga", grid[0], grid[1], {{"distribution", json_string("regular")}}, fields, check);
  GA_Destroy(array);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const Options opt = parse(argc, argv, "matrix_ga");
  if (!opt.row.empty() && opt.row != "ga") usage("matrix_ga", "--row is ga");
  GA_Initialize();
  try {
    const Workload w(opt, world_rank(), world_size());
    run(w);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "matrix_ga: rank %d: %s\n", world_rank(), error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  GA_Terminate();
  MPI_Finalize();
  return 0;
}
