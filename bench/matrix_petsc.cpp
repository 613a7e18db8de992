// matrix_petsc: the PETSc row of bench/matrix.py ("petsc"): the workload of
// bench/matrix_workload.h assembled into a PETSc MATSCALAPACK matrix, the
// dense 2-D block-cyclic type PETSc keeps in ScaLAPACK's layout. Started by
// mpirun -np P; rank 0 prints one JSON line ("kind": "run").
//
//   MatCreate + MatSetSizes(N, N) + MatSetType(MATSCALAPACK) +
//   MatScaLAPACKSetBlockSizes(block, block), on the grid the other rows use
//   (-mat_scalapack_grid_height set to MPI_Dims_create's rows: PETSc's own
//   default would be floor(sqrt(P)) rows); MatSetUp. Per update, for each
//   row i of the upper triangle, MatSetValues(1 row, the n - i columns
//   ix[i..], ADD_VALUES): values a rank does not own go to PETSc's stash;
//   at the end MatAssemblyBegin/End(MAT_FINAL_ASSEMBLY) sends the stash to
//   the owners, who add it.
//
// PETSc here is Debian's real build: PetscScalar is double and PetscInt
// 32-bit, so the values go in as float64 (converted before the timed part,
// exactly: they are multiples of 2^-10) and the stash moves twice the value
// bytes of the float32 rows. The checks read the local array through PETSc's
// private Mat_ScaLAPACK (petsc/private/petscscalapack.h), after the timing.
#include <mpi.h>
#include <petscmat.h>
#include <petsc/private/petscscalapack.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "matrix_workload.h"

namespace {

using namespace matrix_bench;

void check_petsc(PetscErrorCode code, const char* what) {
  if (code != 0) throw std::runtime_error(std::string(what) + " failed with PETSc error " + std::to_string(code));
}

void run(const Workload& w) {
  const Options& opt = w.opt;
  const auto [grid_rows, grid_cols] = square_grid(w.ranks);
  check_petsc(PetscOptionsSetValue(nullptr, "-mat_scalapack_grid_height", std::to_string(grid_rows).c_str()),
              "PetscOptionsSetValue");
  // The inputs PETSc takes: PetscInt indices, PetscScalar (double) values.
  std::vector<std::vector<PetscInt>> indices(w.updates.size());
  std::vector<std::vector<PetscScalar>> values(w.updates.size());
  for (std::size_t u = 0; u < w.updates.size(); ++u) {
    indices[u].assign(w.updates[u].ix.begin(), w.updates[u].ix.end());
    values[u].assign(w.updates[u].values.begin(), w.updates[u].values.end());
  }
  Mat matrix = nullptr;
  check_petsc(MatCreate(PETSC_COMM_WORLD, &matrix), "MatCreate");
  check_petsc(MatSetSizes(matrix, PETSC_DECIDE, PETSC_DECIDE, static_cast<PetscInt>(opt.size),
                          static_cast<PetscInt>(opt.size)),
              "MatSetSizes");
  check_petsc(MatSetType(matrix, MATSCALAPACK), "MatSetType(MATSCALAPACK)");
  check_petsc(MatScaLAPACKSetBlockSizes(matrix, static_cast<PetscInt>(opt.block), static_cast<PetscInt>(opt.block)),
              "MatScaLAPACKSetBlockSizes");
  check_petsc(MatSetUp(matrix), "MatSetUp");
  auto* local = static_cast<Mat_ScaLAPACK*>(matrix->data);
  const Grid grid(opt.size, opt.block, grid_rows, grid_cols, w.rank);
  if (local->grid->nprow != grid_rows || local->grid->npcol != grid_cols || local->grid->myrow != grid.my_row ||
      local->grid->mycol != grid.my_col || local->locr != grid.local_rows || local->locc != grid.local_cols) {
    throw std::runtime_error("PETSc's ScaLAPACK grid is not the block-cyclic layout of the other rows");
  }
  // Zero and touch the local array before timing, as the other rows' are.
  const std::size_t local_elements = static_cast<std::size_t>(local->lld) * static_cast<std::size_t>(local->locc);
  for (std::size_t k = 0; k < local_elements; ++k) local->loc[k] = 0;
  PetscErrorCode failed = 0;
  const Timings t = timed_run(
      w,
      [&](const Update& up) {
        const auto u = static_cast<std::size_t>(&up - w.updates.data());
        const std::vector<PetscInt>& ix = indices[u];
        const PetscScalar* v = values[u].data();
        const auto n = static_cast<PetscInt>(ix.size());
        for (PetscInt i = 0; i < n && failed == 0; ++i) {
          failed = MatSetValues(matrix, 1, ix.data() + i, n - i, ix.data() + i, v + i * n + i, ADD_VALUES);
        }
      },
      [&] {
        if (failed == 0) failed = MatAssemblyBegin(matrix, MAT_FINAL_ASSEMBLY);
        if (failed == 0) failed = MatAssemblyEnd(matrix, MAT_FINAL_ASSEMBLY);
      });
  check_petsc(failed, "MatSetValues or MatAssembly");
  const double local_bytes = static_cast<double>(local_elements) * sizeof(PetscScalar);
  auto fields = common_fields(t, local_bytes);
  const Check check = verify(w, local->loc, block_cyclic_view(grid, local->lld));
  PetscInt size_of_index = sizeof(PetscInt);
  print_run(w, "petsc", grid_rows, grid_cols,
            {{"scalar", json_string("float64")},
             {"petsc_int_bytes", std::to_string(size_of_index)},
             {"petsc_version", json_string(std::to_string(PETSC_VERSION_MAJOR) + "." +
                                           std::to_string(PETSC_VERSION_MINOR) + "." +
                                           std::to_string(PETSC_VERSION_SUBMINOR))}},
            fields, check);
  check_petsc(MatDestroy(&matrix), "MatDestroy");
}

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const Options opt = parse(argc, argv, "matrix_petsc");
  if (!opt.row.empty() && opt.row != "petsc") usage("matrix_petsc", "--row is petsc");
  // PETSc's own options come from nowhere but the program (argv holds ours).
  if (PetscInitializeNoArguments() != 0) {
    std::fprintf(stderr, "matrix_petsc: PetscInitialize failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  try {
    const Workload w(opt, world_rank(), world_size());
    run(w);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "matrix_petsc: rank %d: %s\n", world_rank(), error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  PetscFinalize();
  MPI_Finalize();
  return 0;
}
