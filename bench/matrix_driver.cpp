// matrix_driver: one run of one row of bench/matrix.py (the synthetic
// Hessian assembly of bench/matrix_workload.h), started by mpirun -np P.
// Rank 0 prints one JSON line ("kind": "run").
//
//   --row convergent   resurgo::ConvergentMatrix<float>, MatrixBackend::kMessages
//                      (updates copied into a queue, binned and sent by the
//                      progress thread, applied by the owner):
//                      update_symmetric() per update, commit() at the end.
//   --row rma          the same class with MatrixBackend::kRma
//                      (MPI_Accumulate of an indexed type per bin under an
//                      exclusive lock of the target).
//   --row replicated   the paper's starting point (section II-B3): every rank
//                      keeps a full N x N float32 copy, adds its own updates
//                      into it, and the copies are summed into the owners'
//                      block-cyclic local arrays (MPI_SUM) by one MPI_Reduce
//                      per owner, rooted at the owner (--collective reduce,
//                      the default), or by one MPI_Reduce_scatter
//                      (--collective reduce_scatter). The copy is laid out
//                      owner by owner, each owner's part exactly its
//                      ScaLAPACK local array (column-major, leading
//                      dimension its local rows), so neither needs packing.
//
// Besides the common fields (matrix_workload.h), the ConvergentMatrix rows
// report MatrixStats per rank, and whether binning ran inside update()
// ("binning_in_update": false for kMessages with a progress thread, which
// bins off the caller's thread); `--progress`, `--max-in-flight-mib` and
// `--target-order` set MatrixOptions (`--hot-fraction`: matrix_workload.h).
// Exit status 3 and "unavailable: REASON" on stderr where a
// row cannot run (the replicated row past MPI's int counts).
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "matrix_workload.h"
#include "resurgo/matrix.hpp"

namespace {

using namespace matrix_bench;
constexpr int kUnavailable = 3;

std::string thread_level(int provided) {
  switch (provided) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    default: return "multiple";
  }
}

void run_resurgo(const Workload& w, resurgo::MatrixBackend backend, int provided) {
  const Options& opt = w.opt;
  resurgo::MatrixLayout layout;
  layout.rows = layout.cols = opt.size;
  layout.row_block = layout.col_block = opt.block;
  resurgo::MatrixOptions options;
  options.backend = backend;
  options.progress = opt.progress == "thread"   ? resurgo::MatrixProgress::kThread
                     : opt.progress == "inline" ? resurgo::MatrixProgress::kInline
                                                : resurgo::MatrixProgress::kAuto;
  options.max_in_flight_bytes = static_cast<std::size_t>(opt.max_in_flight_mib) << 20;
  options.target_order = opt.target_order == "fixed" ? resurgo::MatrixTargetOrder::kFixed
                                                     : resurgo::MatrixTargetOrder::kRandom;
  resurgo::ConvergentMatrix<float> matrix(MPI_COMM_WORLD, layout, options);
  const std::function<void()> idle = [&] { matrix.progress(); };
  const Timings t = timed_run(
      w,
      [&](const Update& up) {
        matrix.update_symmetric(std::span<const float>(up.values), std::span<const std::int64_t>(up.ix));
      },
      [&] { matrix.commit(); }, opt.progress == "inline" ? idle : std::function<void()>{});
  const resurgo::MatrixStats stats = matrix.stats();
  const resurgo::MatrixLayout& used = matrix.layout();
  const Grid grid(opt.size, opt.block, used.grid_rows, used.grid_cols, w.rank);
  if (grid.my_row != matrix.grid_row() || grid.my_col != matrix.grid_col() ||
      grid.local_rows != matrix.local_rows() || grid.local_cols != matrix.local_cols()) {
    throw std::runtime_error("the matrix's local part is not the block-cyclic layout the checks expect");
  }
  const double local_bytes = static_cast<double>(matrix.leading_dimension() * matrix.local_cols()) * sizeof(float);
  auto fields = common_fields(t, local_bytes);
  const Check check = verify(w, matrix.local_data(), block_cyclic_view(grid, matrix.leading_dimension()));
  fields.insert(fields.end(), {{"stats_update_s", stats.update_seconds},
                               {"binning_s", stats.binning_seconds},
                               {"backpressure_s", stats.backpressure_seconds},
                               {"stats_commit_s", stats.commit_seconds},
                               {"bytes_sent", static_cast<double>(stats.bytes_sent)},
                               {"elements_sent", static_cast<double>(stats.elements_sent)},
                               {"elements_local", static_cast<double>(stats.elements_local)},
                               {"bins_received", static_cast<double>(stats.bins_received)}});
  const bool progress_thread = options.progress == resurgo::MatrixProgress::kThread ||
                               (options.progress == resurgo::MatrixProgress::kAuto && provided == MPI_THREAD_MULTIPLE);
  const bool binning_in_update = backend == resurgo::MatrixBackend::kRma || !progress_thread;
  print_run(w, w.opt.row, used.grid_rows, used.grid_cols,
            {{"thread_level", json_string(thread_level(provided))},
             {"progress", json_string(opt.progress)},
             {"max_in_flight_mib", std::to_string(opt.max_in_flight_mib)},
             {"target_order", json_string(opt.target_order)},
             {"hot_fraction", std::to_string(opt.hot_fraction)},
             {"binning_in_update", binning_in_update ? "true" : "false"}},
            fields, check);
  matrix.free();
}

void run_replicated(const Workload& w, int provided) {
  const Options& opt = w.opt;
  const auto [grid_rows, grid_cols] = square_grid(w.ranks);
  const Grid grid(opt.size, opt.block, grid_rows, grid_cols, w.rank);
  const std::int64_t elements = opt.size * opt.size;
  // Every owner's local array, in rank order, inside the copy.
  std::vector<std::int64_t> rows_of(static_cast<std::size_t>(grid_rows)), cols_of(static_cast<std::size_t>(grid_cols));
  for (int r = 0; r < grid_rows; ++r) rows_of[static_cast<std::size_t>(r)] = numroc(opt.size, opt.block, r, grid_rows);
  for (int c = 0; c < grid_cols; ++c) cols_of[static_cast<std::size_t>(c)] = numroc(opt.size, opt.block, c, grid_cols);
  std::vector<std::int64_t> base(static_cast<std::size_t>(w.ranks) + 1, 0);
  std::vector<int> counts(static_cast<std::size_t>(w.ranks));
  for (int p = 0; p < w.ranks; ++p) {
    const std::int64_t local =
        rows_of[static_cast<std::size_t>(p / grid_cols)] * cols_of[static_cast<std::size_t>(p % grid_cols)];
    if (local > INT_MAX) {
      if (w.rank == 0) std::fprintf(stderr, "unavailable: a local array of %lld elements exceeds MPI's int count\n",
                                    static_cast<long long>(local));
      MPI_Finalize();
      std::exit(kUnavailable);
    }
    counts[static_cast<std::size_t>(p)] = static_cast<int>(local);
    base[static_cast<std::size_t>(p) + 1] = base[static_cast<std::size_t>(p)] + local;
  }
  std::vector<float> copy(static_cast<std::size_t>(elements), 0.0f);  // zeroed: every page touched
  std::vector<float> local(static_cast<std::size_t>(counts[static_cast<std::size_t>(w.rank)]), 0.0f);
  std::vector<std::int64_t> row_at(static_cast<std::size_t>(w.n)), col_at(static_cast<std::size_t>(w.n));
  std::vector<int> row_proc(static_cast<std::size_t>(w.n)), col_proc(static_cast<std::size_t>(w.n));
  const Timings t = timed_run(
      w,
      [&](const Update& up) {
        // A[ix[i], ix[j]] += v[i, j], i <= j: element (lr, lc) of owner
        // (pr, pc) sits at base[owner] + lc * rows_of[pr] + lr.
        const std::size_t n = up.ix.size();
        for (std::size_t k = 0; k < n; ++k) {
          const std::int64_t g = up.ix[k];
          row_proc[k] = grid.row_owner(g);
          col_proc[k] = grid.col_owner(g);
          row_at[k] = grid.local_row(g);
          col_at[k] = grid.local_col(g);
        }
        for (std::size_t i = 0; i < n; ++i) {
          const int pr = row_proc[i];
          const std::int64_t ld = rows_of[static_cast<std::size_t>(pr)];
          const std::int64_t lr = row_at[i];
          const float* v = up.values.data() + i * n;
          for (std::size_t j = i; j < n; ++j) {
            const std::size_t owner = static_cast<std::size_t>(pr * grid_cols + col_proc[j]);
            copy[static_cast<std::size_t>(base[owner] + col_at[j] * ld + lr)] += v[j];
          }
        }
      },
      [&] {
        if (opt.collective == "reduce_scatter") {
          MPI_Reduce_scatter(copy.data(), local.data(), counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          return;
        }
        // One MPI_Reduce per owner, rooted there, of that owner's part.
        for (int p = 0; p < w.ranks; ++p) {
          const float* part = copy.data() + base[static_cast<std::size_t>(p)];
          MPI_Reduce(part, p == w.rank ? local.data() : nullptr,
                     counts[static_cast<std::size_t>(p)], MPI_FLOAT, MPI_SUM, p, MPI_COMM_WORLD);
        }
      });
  const double local_bytes = static_cast<double>(local.size()) * sizeof(float);
  auto fields = common_fields(t, local_bytes);
  fields.emplace_back("replica_bytes", static_cast<double>(copy.size()) * sizeof(float));
  const Check check = verify(w, local.data(), block_cyclic_view(grid, std::max<std::int64_t>(1, grid.local_rows)));
  print_run(w, "replicated", grid_rows, grid_cols,
            {{"thread_level", json_string(thread_level(provided))},
             {"collective", json_string(opt.collective == "reduce_scatter" ? "MPI_Reduce_scatter"
                                                                            : "MPI_Reduce per owner")}},
            fields, check);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options opt = parse(argc, argv, "matrix_driver");
  if (opt.row != "convergent" && opt.row != "rma" && opt.row != "replicated") {
    usage("matrix_driver", "--row is convergent, rma or replicated");
  }
  try {
    const Workload w(opt, world_rank(), world_size());
    if (opt.row == "replicated") {
      run_replicated(w, provided);
    } else {
      run_resurgo(w, opt.row == "rma" ? resurgo::MatrixBackend::kRma : resurgo::MatrixBackend::kMessages, provided);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "matrix_driver: rank %d: %s\n", world_rank(), error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
