// The write side of a global-layout file's slab exchange
// (src/matrix/slab_collection.h) under mpirun, with chunks of a few
// elements instead of 2 MiB: a row-major file's owners then fill and free
// their ring of a few chunks many times over, with messages that start and
// end part way through rows, and layouts whose parts are fewer than the
// ranks leave some ranks no slab. Every element each holder collects must
// be the one at its place in the file. Prints "N passed, M failed" (over
// all ranks) and exits non-zero on any failure.
//
//   slab_exchange_check   (3 or 4 ranks) every layout and chunk size below, on every grid, in both orders
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "matrix/block_cyclic.h"
#include "matrix/file_slabs.h"
#include "matrix/local_rows.h"
#include "matrix/slab_collection.h"
#include "mpi_checks.h"
#include "resurgo/matrix.hpp"

namespace {

using resurgo::BlockCyclic;
using resurgo::FileOrderSource;
using resurgo::FileSlabs;
using resurgo::LocalRows;
using resurgo::MatrixContext;
using resurgo::MatrixLayout;
using resurgo::MatrixOrder;
using resurgo::SlabCollection;
using resurgo::mpi_checks::check;
using resurgo::mpi_checks::world_rank;
using resurgo::mpi_checks::world_size;

double value(std::int64_t row, std::int64_t col) { return static_cast<double>(row * 100003 + col) + 0.25; }

// This rank's local array of `layout`, every element value(row, col).
std::vector<double> local_array(const BlockCyclic& layout, int rank) {
  std::vector<double> storage(static_cast<std::size_t>(layout.storage_elements(rank)), -1.0);
  const int grid_row = layout.grid_row_of(rank);
  const int grid_col = layout.grid_col_of(rank);
  const std::int64_t lld = layout.leading_dimension(grid_row);
  for (std::int64_t j = 0; j < layout.cols().local_extent(grid_col); ++j) {
    for (std::int64_t i = 0; i < layout.rows().local_extent(grid_row); ++i) {
      storage[j * lld + i] = value(layout.rows().global_index(i, grid_row), layout.cols().global_index(j, grid_col));
    }
  }
  return storage;
}

// Where the exchange takes this rank's elements from, as write_global does.
FileOrderSource<double> source_of(const BlockCyclic& layout, int rank, std::vector<double>& storage,
                                  MatrixOrder order) {
  if (order == MatrixOrder::kColumnMajor) return FileOrderSource<double>{.in_place = storage.data()};
  const LocalRows<double> rows{storage.data(), layout.leading_dimension(layout.grid_row_of(rank)),
                               layout.cols().local_extent(layout.grid_col_of(rank))};
  return FileOrderSource<double>{
      .take = [rows](std::uint64_t offset, std::uint64_t count, double* out) { rows.copy_out_at(offset, count, out); }};
}

// One exchange: this rank's slab, collected a chunk at a time.
void exchange(const MatrixLayout& shape, MatrixOrder order, std::uint64_t part_elements, std::uint64_t chunk) {
  const MatrixContext context{MPI_COMM_WORLD, world_rank(), world_size(), BlockCyclic(shape), {}};
  std::vector<double> storage = local_array(context.layout, context.rank);
  const FileSlabs slabs(context.layout, context.size, order, part_elements);
  SlabCollection<double> collection(context, slabs, source_of(context.layout, context.rank, storage, order), chunk);
  collection.start();
  const std::uint64_t elements = slabs.elements(context.rank);
  std::vector<double> slab(elements, -1.0);
  for (std::uint64_t at = 0; at < elements; at += chunk) {
    collection.collect(at, std::min(chunk, elements - at), slab.data() + at);
  }
  collection.finish();
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < elements; ++i) {
    const auto index = static_cast<std::int64_t>(slabs.first(context.rank) + i);
    const bool row_major = order == MatrixOrder::kRowMajor;
    const std::int64_t line = row_major ? shape.cols : shape.rows;
    const double wanted = row_major ? value(index / line, index % line) : value(index % line, index / line);
    wrong += slab[i] == wanted ? 0 : 1;
  }
  check(wrong == 0, std::to_string(wrong) + " of " + std::to_string(elements) + " elements wrong in a " +
                        std::to_string(shape.rows) + " x " + std::to_string(shape.cols) + " matrix on " +
                        std::to_string(shape.grid_rows) + " x " + std::to_string(shape.grid_cols) + ", " +
                        (order == MatrixOrder::kRowMajor ? "row" : "column") + "-major, parts of " +
                        std::to_string(part_elements) + ", chunks of " + std::to_string(chunk));
}

// The grids of `ranks` processes: one row, one column, and for 4 a square.
std::vector<std::pair<int, int>> grids(int ranks) {
  std::vector<std::pair<int, int>> all{{1, ranks}, {ranks, 1}};
  if (ranks == 4) all.emplace_back(2, 2);
  return all;
}

void run() {
  check(world_size() == 3 || world_size() == 4, "slab_exchange_check runs on 3 or 4 ranks");
  struct Case {
    std::int64_t rows, cols, row_block, col_block;
    std::uint64_t part_elements;
    std::vector<std::uint64_t> chunks;
  };
  // Blocks that split rows between owners part way; parts that leave some
  // ranks no slab (the third case: one part for all); and messages past
  // MPI's eager limit (the last case: 8 KiB and more), which the receiver
  // takes from the ring while the sender goes on, so that a ring stretch
  // reused too early shows.
  const std::vector<std::uint64_t> few{1, 3, 7, 64};
  const Case cases[] = {{29, 23, 4, 3, 50, few},
                        {40, 37, 7, 5, 128, few},
                        {17, 13, 16, 2, 1000, few},
                        {300, 250, 16, 9, 20000, {1000, 2048}}};
  for (const Case& c : cases) {
    for (const auto& [grid_rows, grid_cols] : grids(world_size())) {
      const MatrixLayout shape{c.rows, c.cols, c.row_block, c.col_block, grid_rows, grid_cols};
      for (const MatrixOrder order : {MatrixOrder::kRowMajor, MatrixOrder::kColumnMajor}) {
        for (const std::uint64_t chunk : c.chunks) exchange(shape, order, c.part_elements, chunk);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  try {
    run();
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return resurgo::mpi_checks::finish_counted("slab_exchange_check", "");
}
