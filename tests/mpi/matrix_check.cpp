// ConvergentMatrix under mpirun: each mode is one run of a job, and
// tests/mpi/CMakeLists.txt runs them at several rank counts. Values are
// small integers held in float or double, so that sums are exact in any
// order: every rank generates the whole update stream from one seed, issues
// its own share of it (the last rank of a job of several issues none), and
// compares its local part with the sum of the whole stream. Prints
// "N passed, M failed" (over all ranks) and exits non-zero on any failure.
//
//   matrix_check assemble [PxQ...]    each backend x type x progress on the grids (default: every grid of
//                                     this job's size), over a general M != N matrix, a symmetric one, a vector and a 3
//                                     x 3 one that most ranks own nothing of; several commits, reset, a tiny cap; a
//                                     symmetric update sends one triangle and adds it to the bit as the full square
//   matrix_check api                  layout arithmetic against a brute-force count, descriptor, owner, at,
//                                     the 0 x 0 grid, the random target order
//   matrix_check bad-input            errors: indices out of range, lengths, layouts, use after free, ...;
//                                     (3+ ranks) rank 1 away from commit(): the others' commit and update time out
//                                     naming it, and go on once it comes
//   matrix_check serialized           MPI without MPI_THREAD_MULTIPLE: kThread refused, kAuto works inline
//   matrix_check collective-mismatch  (2 ranks) commit() against free() with check_collective: both throw
//   matrix_check checkpoint-write     (4 ranks) assemble and checkpoint version 1 of two matrices
//   matrix_check checkpoint-restart   restart them: values and epoch
//   matrix_check checkpoint-other-layout  restart with another block size or element type: MismatchError
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "matrix/polite_wait.h"
#include "matrix/target_order.h"
#include "matrix_elements.h"
#include "mpi_checks.h"
#include "resurgo/matrix.hpp"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

using resurgo::ConvergentMatrix;
using resurgo::MatrixBackend;
using resurgo::MatrixLayout;
using resurgo::MatrixOptions;
using resurgo::MatrixProgress;

using resurgo::mpi_checks::check;
using resurgo::mpi_checks::expect_error;
using resurgo::mpi_checks::for_each_local;
using resurgo::mpi_checks::world_rank;
using resurgo::mpi_checks::world_size;

std::string describe(const MatrixLayout& layout, const MatrixOptions& options, const char* type) {
  return std::string(type) + " " + (options.backend == MatrixBackend::kRma ? "rma" : "messages") + " " +
         (options.progress == MatrixProgress::kThread ? "thread" : "inline") + " " + std::to_string(layout.rows) + "x" +
         std::to_string(layout.cols) + " blocks " + std::to_string(layout.row_block) + "x" +
         std::to_string(layout.col_block) + " grid " + std::to_string(layout.grid_rows) + "x" +
         std::to_string(layout.grid_cols);
}

// ---- the update stream and its reference sum ----

enum class Kind { kGeneral, kSymmetric, kVector };

struct Update {
  std::vector<std::int64_t> rows;
  std::vector<std::int64_t> cols;  // the same as rows for a symmetric update
  std::vector<int> values;         // rows x cols, row-major
};

std::vector<std::int64_t> random_indices(std::mt19937_64& random, std::int64_t bound, int most) {
  std::vector<std::int64_t> indices(
      std::uniform_int_distribution<std::size_t>(0, static_cast<std::size_t>(most))(random));
  for (std::int64_t& index : indices) index = std::uniform_int_distribution<std::int64_t>(0, bound - 1)(random);
  return indices;  // unsorted, with duplicates now and then
}

// `count` updates of up to `most` rows and columns; the first holds a
// duplicated row and column for sure.
std::vector<Update> make_stream(std::uint64_t seed, int count, const MatrixLayout& layout, Kind kind, int most = 7) {
  std::mt19937_64 random(seed);
  std::vector<Update> stream(static_cast<std::size_t>(count));
  for (Update& update : stream) {
    update.rows =
        random_indices(random, kind == Kind::kGeneral ? layout.rows : std::min(layout.rows, layout.cols), most);
    update.cols = kind == Kind::kGeneral     ? random_indices(random, layout.cols, most)
                  : kind == Kind::kSymmetric ? update.rows
                                             : std::vector<std::int64_t>{0};
    update.values.resize(update.rows.size() * update.cols.size());
    for (int& value : update.values) value = std::uniform_int_distribution<int>(-4, 4)(random);
  }
  if (count > 0 && kind != Kind::kVector) {
    Update& first = stream.front();
    first.rows = {layout.rows - 1, 0, layout.rows - 1};
    first.cols = kind == Kind::kSymmetric ? first.rows : std::vector<std::int64_t>{layout.cols - 1, 0, 0};
    first.values = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  }
  return stream;
}

// The dense M x N sum, row-major.
struct Reference {
  MatrixLayout layout;
  std::vector<double> values = std::vector<double>(static_cast<std::size_t>(layout.rows * layout.cols), 0.0);

  void add(const Update& update, Kind kind) {
    for (std::size_t i = 0; i < update.rows.size(); ++i) {
      for (std::size_t j = 0; j < update.cols.size(); ++j) {
        if (kind == Kind::kSymmetric && update.rows[i] > update.cols[j]) continue;
        values[static_cast<std::size_t>(update.rows[i] * layout.cols + update.cols[j])] +=
            update.values[i * update.cols.size() + j];
      }
    }
  }
  double at(std::int64_t row, std::int64_t col) const {
    return values[static_cast<std::size_t>(row * layout.cols + col)];
  }
};

// Update `index` of the stream is issued by this rank?
bool issues(int index) {
  const int issuers = std::max(1, world_size() - 1);
  return index % issuers == world_rank();
}

template <typename T>
void issue(ConvergentMatrix<T>& matrix, const Update& update, Kind kind) {
  const std::vector<T> values(update.values.begin(), update.values.end());
  if (kind == Kind::kSymmetric) {
    matrix.update_symmetric(values, update.rows);
  } else if (kind == Kind::kVector) {
    matrix.update_vector(values, update.rows);
  } else {
    matrix.update(values, update.rows, update.cols);
  }
}

// Whether this rank's local part holds `expected(row, col)` at each of its
// global elements, to the bit; the first difference otherwise.
template <typename T>
bool local_part_is(ConvergentMatrix<T>& matrix, const std::function<T(std::int64_t, std::int64_t)>& expected,
                   std::string& first_difference) {
  bool same = true;
  for_each_local<T>(matrix, [&](std::int64_t row, std::int64_t col, T& held) {
    const T wanted = expected(row, col);
    if (!same || std::memcmp(&held, &wanted, sizeof(T)) == 0) return;
    same = false;
    first_difference = "A(" + std::to_string(row) + ", " + std::to_string(col) + ") = " + std::to_string(held) +
                       ", expected " + std::to_string(wanted);
  });
  return same;
}

// Whether this rank's local part equals the reference (small integers:
// exact in T).
template <typename T>
bool local_part_matches(ConvergentMatrix<T>& matrix, const Reference& reference, std::string& first_difference) {
  return local_part_is<T>(
      matrix, [&](std::int64_t row, std::int64_t col) { return static_cast<T>(reference.at(row, col)); },
      first_difference);
}

// Until the other ranks have read their parts: a rank done reading may
// update again at once, and its bins would land in parts still being
// compared. (A barrier that does not spin, so the ranks still reading keep
// the cores.)
void wait_for_the_readers() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  resurgo::wait_politely(request);
}

template <typename T>
void check_against(ConvergentMatrix<T>& matrix, const Reference& reference, const std::string& what) {
  std::string difference;
  const bool matches = local_part_matches(matrix, reference, difference);
  check(matches, what + ": " + difference);
  wait_for_the_readers();
}

// How many of this rank's updates, its last one left out, have two or more
// targets other than this rank: with a tiny cap, such an update is still
// queued when the next comes, which waits.
int updates_with_two_remote_targets(ConvergentMatrix<double>& matrix, const std::vector<Update>& stream, Kind kind) {
  int count = 0;
  int last = -1;
  for (std::size_t index = 0; index < stream.size(); ++index) {
    if (issues(static_cast<int>(index))) last = static_cast<int>(index);
  }
  for (int index = 0; index < last; ++index) {
    if (!issues(index)) continue;
    const Update& update = stream[static_cast<std::size_t>(index)];
    std::set<int> remote;
    for (const std::int64_t row : update.rows) {
      for (const std::int64_t col : update.cols) {
        if (kind == Kind::kSymmetric && row > col) continue;
        if (!matrix.owns(row, col)) remote.insert(matrix.owner(row, col));
      }
    }
    count += remote.size() >= 2 ? 1 : 0;
  }
  return count;
}

// ---- assemble ----

// Three phases with a commit after each, then reset, then a fourth phase.
template <typename T>
void assemble(const MatrixLayout& layout, const MatrixOptions& options, Kind kind, const char* type) {
  const std::string what = describe(layout, options, type) + (kind == Kind::kSymmetric ? " symmetric"
                                                              : kind == Kind::kVector  ? " vector"
                                                                                       : "");
  ConvergentMatrix<T> matrix(MPI_COMM_WORLD, layout, options);
  const std::vector<Update> stream = make_stream(0xc0ffee + static_cast<std::uint64_t>(layout.rows), 48, layout, kind);
  Reference reference{layout};
  std::uint64_t issued = 0;
  for (int phase = 0; phase < 3; ++phase) {
    for (int index = phase * 16; index < (phase + 1) * 16; ++index) {
      reference.add(stream[static_cast<std::size_t>(index)], kind);
      if (!issues(index)) continue;
      issue(matrix, stream[static_cast<std::size_t>(index)], kind);
      ++issued;
      if (index % 5 == 0) matrix.progress();
    }
    matrix.commit();
    check_against(matrix, reference, what + " after commit " + std::to_string(phase + 1));
  }
  const resurgo::MatrixStats stats = matrix.stats();
  check(stats.updates == issued && stats.commits == 3, what + ": stats count " + std::to_string(stats.updates) +
                                                           " updates and " + std::to_string(stats.commits) +
                                                           " commits");
  check(issued == 0 || stats.elements_sent + stats.elements_local > 0, what + ": the updates' elements are counted");
  check(stats.update_seconds >= stats.backpressure_seconds && stats.commit_seconds > 0 &&
            (issued == 0 || stats.binning_seconds > 0),
        what + ": the times add up, and binning is counted wherever it ran");

  matrix.reset();
  check_against(matrix, Reference{layout}, what + " after reset");
  check(matrix.stats().updates == 0 && matrix.stats().commits == 4,
        what + ": reset restarts the statistics, not the epoch");
  Reference after_reset{layout};
  for (int index = 0; index < 8; ++index) {
    after_reset.add(stream[static_cast<std::size_t>(index)], kind);
    if (issues(index)) issue(matrix, stream[static_cast<std::size_t>(index)], kind);
  }
  matrix.commit();
  check_against(matrix, after_reset, what + " after reset and commit");
  matrix.free();
}

// A cap of one byte: every bin to another rank waits until the one before
// it completed, every update until the one before is sent, and the result
// is the same. Bins of up to 60 x 50 values
// are past MPI's eager limit: their sends complete only once the target
// receives, which a target already waiting in commit's collective check
// must still do (no progress thread here).
void assemble_under_backpressure(const MatrixLayout& layout, MatrixBackend backend) {
  MatrixOptions options{
      .backend = backend, .progress = MatrixProgress::kInline, .max_in_flight_bytes = 1, .check_collective = true};
  const std::string what = describe(layout, options, "double") + " capped at 1 byte";
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout, options);
  const std::vector<Update> stream = make_stream(77, 40, layout, Kind::kGeneral, 60);
  Reference reference{layout};
  for (int index = 0; index < 40; ++index) {
    reference.add(stream[static_cast<std::size_t>(index)], Kind::kGeneral);
    if (issues(index)) issue(matrix, stream[static_cast<std::size_t>(index)], Kind::kGeneral);
  }
  matrix.commit();
  check_against(matrix, reference, what);
  if (backend == MatrixBackend::kMessages && updates_with_two_remote_targets(matrix, stream, Kind::kGeneral) > 0) {
    check(matrix.stats().backpressure_seconds > 0, what + ": the waits under the cap are counted");
  }
}

// A symmetric update sends one triangle, and the owners add it to the bit
// as they add the whole square with its lower pairs zeroed, in issue order:
// rank 0 issues every update (so each element's additions come in one
// order), with duplicate indices and values that no order sums exactly.
template <typename T>
void symmetric_is_one_triangle(const MatrixLayout& grid, MatrixProgress progress, const char* type) {
  const MatrixLayout layout{33, 33, 4, 4, grid.grid_rows, grid.grid_cols};
  const MatrixOptions options{.progress = progress};
  const std::string what = describe(layout, options, type) + " symmetric, one triangle";
  ConvergentMatrix<T> triangle(MPI_COMM_WORLD, layout, options);
  ConvergentMatrix<T> square(MPI_COMM_WORLD, layout, options);
  std::mt19937_64 random(0x5ca1ab1e);
  std::uniform_real_distribution<double> value(-1, 1);
  std::vector<T> serial(static_cast<std::size_t>(layout.rows * layout.cols), T{0});  // row-major
  std::uint64_t upper_pairs = 0;
  for (int count = 0; count < 12; ++count) {
    const std::vector<std::int64_t> ix = random_indices(random, layout.rows, 9);
    const std::size_t n = ix.size();
    std::vector<T> values(n * n);
    std::vector<T> lower_zeroed(n * n, T{0});
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        values[i * n + j] = static_cast<T>(value(random));
        if (ix[i] > ix[j]) continue;
        lower_zeroed[i * n + j] = values[i * n + j];
        serial[static_cast<std::size_t>(ix[i] * layout.cols + ix[j])] += values[i * n + j];
        ++upper_pairs;
      }
    }
    if (world_rank() != 0) continue;
    triangle.update_symmetric(values, ix);
    square.update(lower_zeroed, ix, ix);
  }
  triangle.commit();
  square.commit();
  std::string difference;
  check(local_part_is<T>(
            triangle, [&](std::int64_t row, std::int64_t col) { return serial[row * layout.cols + col]; }, difference),
        what + ": as the serial sum in issue order, to the bit: " + difference);
  const std::size_t bytes = static_cast<std::size_t>(triangle.local_cols() * triangle.leading_dimension()) * sizeof(T);
  check(std::memcmp(triangle.local_data(), square.local_data(), bytes) == 0,
        what + ": the same bits as update() of the square with the lower pairs zeroed");
  if (world_rank() == 0) {
    const resurgo::MatrixStats sent = triangle.stats();
    const resurgo::MatrixStats full = square.stats();
    check(sent.elements_sent + sent.elements_local == upper_pairs,
          what + ": " + std::to_string(sent.elements_sent + sent.elements_local) + " elements sent or added here for " +
              std::to_string(upper_pairs) + " upper-triangle pairs");
    check(full.elements_sent + full.elements_local > upper_pairs &&
              (world_size() == 1 || full.bytes_sent > sent.bytes_sent),
          what + ": the square sends its zeros too");
  }
  wait_for_the_readers();
  triangle.free();
  square.free();
}

std::vector<std::pair<int, int>> grids_of(int size) {
  std::vector<std::pair<int, int>> grids;
  for (int rows = 1; rows <= size; ++rows) {
    if (size % rows == 0) grids.emplace_back(rows, size / rows);
  }
  return grids;
}

template <typename T>
void assemble_every_option(const MatrixLayout& grid, const char* type) {
  for (const MatrixBackend backend : {MatrixBackend::kMessages, MatrixBackend::kRma}) {
    for (const MatrixProgress progress : {MatrixProgress::kInline, MatrixProgress::kThread}) {
      // check_collective on with the thread: every matching call must pass it.
      const MatrixOptions options{
          .backend = backend, .progress = progress, .check_collective = progress == MatrixProgress::kThread};
      const auto with = [&](std::int64_t rows, std::int64_t cols, std::int64_t row_block, std::int64_t col_block) {
        return MatrixLayout{rows, cols, row_block, col_block, grid.grid_rows, grid.grid_cols};
      };
      assemble<T>(with(37, 29, 4, 3), options, Kind::kGeneral, type);
      assemble<T>(with(31, 31, 5, 5), options, Kind::kSymmetric, type);
      assemble<T>(with(41, 1, 6, 1), options, Kind::kVector, type);
      assemble<T>(with(3, 3, 2, 2), options, Kind::kGeneral, type);  // most ranks of a large job own nothing
    }
  }
}

// `grids`: "PxQ" each, or none for every grid of this job's size.
void assemble_all(const std::vector<std::string>& grids) {
  std::vector<std::pair<int, int>> chosen;
  for (const std::string& grid : grids)
    chosen.emplace_back(std::stoi(grid), std::stoi(grid.substr(grid.find('x') + 1)));
  if (chosen.empty()) chosen = grids_of(world_size());
  for (const auto& [grid_rows, grid_cols] : chosen) {
    const MatrixLayout grid{0, 0, 0, 0, grid_rows, grid_cols};
    assemble_every_option<float>(grid, "float");
    assemble_every_option<double>(grid, "double");
    for (const MatrixBackend backend : {MatrixBackend::kMessages, MatrixBackend::kRma}) {
      assemble_under_backpressure({120, 100, 7, 9, grid_rows, grid_cols}, backend);
    }
    for (const MatrixProgress progress : {MatrixProgress::kInline, MatrixProgress::kThread}) {
      symmetric_is_one_triangle<float>(grid, progress, "float");
      symmetric_is_one_triangle<double>(grid, progress, "double");
    }
  }
}

// ---- api ----

void check_distribution(const MatrixLayout& layout) {
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout);
  const MatrixLayout& filled = matrix.layout();
  const std::string what = describe(filled, {}, "double");
  // Every element is owned by exactly one rank, the one owner() names, and
  // the local sizes add up to the matrix.
  long mine = 0;
  for (std::int64_t row = 0; row < filled.rows; ++row) {
    for (std::int64_t col = 0; col < filled.cols; ++col) mine += matrix.owns(row, col) ? 1 : 0;
  }
  long owned = 0;
  long stored = matrix.local_rows() * matrix.local_cols();
  long total = 0;
  MPI_Allreduce(&mine, &owned, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&stored, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  check(owned == filled.rows * filled.cols && total == owned && mine == stored,
        what + ": each element has one owner and the local sizes add up");
  check(matrix.leading_dimension() == std::max<std::int64_t>(1, matrix.local_rows()),
        what + ": lld = max(1, local rows)");
  check(matrix.grid_row() * filled.grid_cols + matrix.grid_col() == world_rank(), what + ": rank r is (r / Q, r % Q)");
  const std::array<int, 9> descriptor = matrix.descriptor(7);
  const auto as_int = [](std::int64_t value) { return static_cast<int>(value); };
  const int lld = as_int(matrix.leading_dimension());
  const std::array<int, 9> expected{
      1, 7, as_int(filled.rows), as_int(filled.cols), as_int(filled.row_block), as_int(filled.col_block), 0, 0, lld};
  check(descriptor == expected, what + ": the ScaLAPACK descriptor");
}

// An element the owner puts in is read back by at() there.
void check_at() {
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {9, 7, 2, 3, 0, 0});
  const std::vector<double> value{5};
  const std::vector<std::int64_t> row{8};
  const std::vector<std::int64_t> col{6};
  if (world_rank() == 0) matrix.update(value, row, col);
  matrix.commit();
  if (matrix.owns(8, 6)) check(matrix.at(8, 6) == 5, "at(8, 6) reads what rank 0 added");
  check(matrix.owner(0, 0) == 0, "element (0, 0) is on rank 0");
}

// The hook behind update()'s random target order: two ranks' orders differ,
// and one (seed, rank) repeats its orders.
void check_target_order() {
  std::vector<int> first(16);
  for (int i = 0; i < 16; ++i) first[static_cast<std::size_t>(i)] = i;
  std::vector<int> second = first;
  std::vector<int> again = first;
  resurgo::TargetOrder(0x5eed, 0).arrange(first);
  resurgo::TargetOrder(0x5eed, 1).arrange(second);
  resurgo::TargetOrder(0x5eed, 0).arrange(again);
  check(first != second, "ranks 0 and 1 visit 16 targets in different orders");
  check(first == again, "one seed and rank give one order");
}

void api() {
  const int size = world_size();
  for (const auto& [grid_rows, grid_cols] : grids_of(size)) {
    check_distribution({23, 17, 3, 2, grid_rows, grid_cols});
    check_distribution({5, 40, 7, 1, grid_rows, grid_cols});
  }
  ConvergentMatrix<float> square(MPI_COMM_WORLD, {10, 10, 2, 2, 0, 0});
  int dims[2] = {0, 0};
  MPI_Dims_create(size, 2, dims);
  check(square.layout().grid_rows == dims[0] && square.layout().grid_cols == dims[1],
        "grid 0 x 0 is filled in by MPI_Dims_create");
  check_at();
  check_target_order();
}

// ---- bad input ----

void bad_updates(MatrixBackend backend) {
  const MatrixLayout layout{40, 30, 4, 4, 0, 0};
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout, {.backend = backend});
  const std::vector<double> values(6, 1.0);
  const std::vector<std::int64_t> rows{1, 45, 2};
  const std::vector<std::int64_t> cols{3, 4};
  const std::vector<std::int64_t> good_rows{1, 2, 3};
  const std::vector<std::int64_t> negative_cols{-1, 4};
  expect_error<resurgo::InvalidArgumentError>([&] { matrix.update(values, rows, cols); },
                                              {"rows[1] = 45", "[0, 40)", "nothing of this update was applied"},
                                              "a row out of range");
  expect_error<resurgo::InvalidArgumentError>([&] { matrix.update(values, good_rows, negative_cols); },
                                              {"cols[0] = -1", "[0, 30)"}, "a negative column");
  expect_error<resurgo::InvalidArgumentError>([&] { matrix.update(std::vector<double>(5, 1.0), good_rows, cols); },
                                              {"5 values", "3 rows x 2 columns"},
                                              "values that do not match the indices");
  const std::vector<std::int64_t> ix{0, 35};
  expect_error<resurgo::InvalidArgumentError>([&] { matrix.update_symmetric(std::vector<double>(4, 1.0), ix); },
                                              {"update_symmetric", "ix[1] = 35", "[0, 30)"},
                                              "a symmetric index out of range");
  expect_error<resurgo::InvalidArgumentError>([&] { matrix.update_vector(std::vector<double>(3, 1.0), good_rows); },
                                              {"update_vector", "30 columns"},
                                              "update_vector on a matrix of 30 columns");
  matrix.commit();
  check_against(matrix, Reference{layout}, "the matrix is unchanged by the refused updates");
  if (!matrix.owns(0, 0)) {
    expect_error<resurgo::InvalidArgumentError>([&] { static_cast<void>(matrix.at(0, 0)); }, {"is stored on rank 0"},
                                                "at() of an element of another rank");
  }
  expect_error<resurgo::InvalidArgumentError>([&] { static_cast<void>(matrix.at(40, 0)); }, {"(40, 0)", "40 x 30"},
                                              "at() outside the matrix");
  matrix.free();
  expect_error<resurgo::StateError>([&] { matrix.update(values, good_rows, cols); }, {"used after free()"},
                                    "update after free");
  expect_error<resurgo::StateError>([&] { matrix.commit(); }, {"used after free()"}, "commit after free");
  expect_error<resurgo::StateError>([&] { static_cast<void>(matrix.local_data()); }, {"used after free()"},
                                    "local_data after free");
  expect_error<resurgo::StateError>([&] { matrix.free(); }, {"used after free()"}, "free twice");
}

void bad_layouts() {
  const int size = world_size();
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {10, 10, 2, 2, size + 1, 1});
      },
      {"a grid of " + std::to_string(size + 1) + " x 1", std::to_string(size) + " ranks"}, "a grid of another size");
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {0, 10, 2, 2, 0, 0});
      },
      {"0 x 10"}, "a matrix of no rows");
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {10, 10, 2, 0, 0, 0});
      },
      {"blocks of 2 x 0"}, "a block of no columns");
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {10, 10, 2, 2, 0, 0}, {.timeout_seconds = -1});
      },
      {"timeout_seconds is -1", ">= 0"}, "a negative timeout");
  // One rank would hold 2^31 elements: refused before anything is allocated.
  const std::int64_t columns = std::int64_t{1} << 31;
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<float> matrix(MPI_COMM_WORLD, {1, columns, 1, columns, 1, size},
                                       {.backend = MatrixBackend::kRma});
      },
      {"rank 0", "2147483648 elements", "kMessages"}, "an RMA window beyond int displacements");
}

// ---- a rank away from commit() ----

constexpr int kSignalTag = 99;

// Tells rank `to` that this one timed out (on MPI_COMM_WORLD, not the
// matrix's communicator).
void signal_rank(int to) {
  int value = world_rank();
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Isend(&value, 1, MPI_INT, to, kSignalTag, MPI_COMM_WORLD, &request);
  resurgo::wait_politely(request);
}

void await_signal(int from) {
  int value = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Irecv(&value, 1, MPI_INT, from, kSignalTag, MPI_COMM_WORLD, &request);
  resurgo::wait_politely(request);
}

// commit() again after each timeout: each call goes on where the last one
// stopped.
void commit_until_done(ConvergentMatrix<double>& matrix) {
  for (int timeouts = 0;; ++timeouts) {
    try {
      matrix.commit();
      return;
    } catch (const resurgo::StateError& error) {
      if (timeouts == 1000 || std::string(error.what()).find("timeout_seconds") == std::string::npos) throw;
    }
  }
}

// The ranks but rank 1 meet, so that they enter the next commit together:
// then rank 1 alone is missing when it times out.
void meet_without_rank_1() {
  for (int other = 0; other < world_size(); ++other) {
    if (other != 1 && other != world_rank()) signal_rank(other);
  }
  for (int other = 0; other < world_size(); ++other) {
    if (other != 1 && other != world_rank()) await_signal(other);
  }
}

// Rank 1 stays away from a commit: the others' commit times out naming it,
// refuses updates until it ends, and ends once rank 1 comes.
void commit_names_the_missing_rank() {
  const MatrixLayout layout{30, 30, 4, 4, 0, 0};
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout,
                                  {.progress = MatrixProgress::kInline, .timeout_seconds = 0.3});
  const std::vector<Update> stream = make_stream(5, 6, layout, Kind::kGeneral);
  Reference reference{layout};
  for (const Update& update : stream) {
    reference.add(update, Kind::kGeneral);
    if (world_rank() == 0) issue(matrix, update, Kind::kGeneral);
  }
  if (world_rank() == 1) {
    for (int other = 0; other < world_size(); ++other) {
      if (other != 1) await_signal(other);
    }
  } else {
    meet_without_rank_1();
    expect_error<resurgo::StateError>(
        [&] { matrix.commit(); },
        {"ConvergentMatrix::commit: after 0.3 s", "rank 1 has not joined this commit()", "call commit() again"},
        "a commit rank 1 stays away from");
    expect_error<resurgo::StateError>([&] { issue(matrix, stream.front(), Kind::kGeneral); },
                                      {"a commit() that timed out has not completed"},
                                      "an update before the commit that timed out ended");
    signal_rank(1);
  }
  commit_until_done(matrix);
  check_against(matrix, reference, "the commit rank 1 came late to");
  check(matrix.stats().commits == 1, "a commit that timed out and then ended counts once");
  matrix.free();
}

// Rank 1 stays away and receives nothing (no progress thread): rank 0's
// bins to it, past the eager limit, stay in flight, so under a 1-byte cap
// its queue stays full; its update() times out naming rank 1 and takes
// nothing, and so does its commit(). Once rank 1 comes, both go on. The
// updates' rows are those of ranks 0 and 1 (a P x 1 grid), so that no bin
// to a third rank is ever in flight.
void full_queue_names_the_rank_that_does_not_receive() {
  const MatrixLayout layout{120, 300, 8, 8, world_size(), 1};  // bins of up to 40 x 300 doubles
  const bool sender = world_rank() == 0;
  const MatrixOptions options{
      .progress = MatrixProgress::kInline, .max_in_flight_bytes = 1, .timeout_seconds = sender ? 0.3 : 0.0};
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout, options);
  std::vector<Update> stream(4);
  Reference reference{layout};
  for (std::size_t index = 0; index < stream.size(); ++index) {
    for (std::int64_t row = 0; row < layout.rows; ++row) {
      if (matrix.owner(row, 0) <= 1) stream[index].rows.push_back(row);
    }
    for (std::int64_t col = 0; col < layout.cols; ++col) stream[index].cols.push_back(col);
    stream[index].values.assign(stream[index].rows.size() * stream[index].cols.size(), static_cast<int>(index) + 1);
    reference.add(stream[index], Kind::kGeneral);
  }
  std::size_t taken = 0;
  if (sender) {
    for (; taken < stream.size(); ++taken) {
      try {
        issue(matrix, stream[taken], Kind::kGeneral);
      } catch (const resurgo::StateError& error) {
        const std::string message = error.what();
        check(message.find("bins to rank 1 are not received yet") != std::string::npos &&
                  message.find("nothing of this update was applied") != std::string::npos,
              "the update that found the queue full names rank 1: '" + message + "'");
        break;
      }
    }
    check(taken == 2, "the third update waited for room no longer than its timeout (" + std::to_string(taken) +
                          " taken)");
    check(matrix.stats().backpressure_seconds >= 0.3, "the wait for room is counted");
    expect_error<resurgo::StateError>(
        [&] { matrix.commit(); }, {"this rank's updates are not all sent", "bins to rank 1 are not received yet"},
        "a commit whose queue rank 1 does not drain");
    signal_rank(1);
    commit_until_done(matrix);
    for (; taken < stream.size(); ++taken) issue(matrix, stream[taken], Kind::kGeneral);
  } else {
    if (world_rank() == 1) await_signal(0);
    matrix.commit();
  }
  matrix.commit();
  check_against(matrix, reference, "the updates of a queue rank 1 drained late");
  matrix.free();
}

void bad_input() {
  bad_updates(MatrixBackend::kMessages);
  bad_updates(MatrixBackend::kRma);
  bad_layouts();
  if (world_size() >= 3) {
    commit_names_the_missing_rank();
    full_queue_names_the_rank_that_does_not_receive();
  }
}

// ---- MPI without MPI_THREAD_MULTIPLE ----

void serialized() {
  expect_error<resurgo::InvalidArgumentError>(
      [] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {8, 8, 2, 2, 0, 0}, {.progress = MatrixProgress::kThread});
      },
      {"MPI_THREAD_MULTIPLE"}, "kThread without MPI_THREAD_MULTIPLE");
  for (const MatrixBackend backend : {MatrixBackend::kMessages, MatrixBackend::kRma}) {
    assemble<double>({37, 29, 4, 3, 0, 0}, {.backend = backend}, Kind::kGeneral, "double");
  }
}

// ---- check_collective ----

// Rank 0 commits twice where rank 1 commits once and frees: both throw, and
// the destructors free the matrix on both without hanging.
void collective_mismatch() {
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {8, 8, 2, 2, 0, 0}, {.check_collective = true});
  const std::vector<double> values{1, 1};
  const std::vector<std::int64_t> rows{0, 7};
  const std::vector<std::int64_t> cols{3};
  matrix.update(values, rows, cols);
  matrix.commit();
  matrix.update(values, rows, cols);
  const std::vector<std::string> named{"commit() #2 on some ranks met free() #2 on others"};
  if (world_rank() == 0) {
    expect_error<resurgo::StateError>([&] { matrix.commit(); }, named, "rank 0's second commit against a free");
    expect_error<resurgo::StateError>([&] { matrix.commit(); }, {"can only be freed"}, "a commit after the mismatch");
  } else {
    expect_error<resurgo::StateError>([&] { matrix.free(); }, named, "rank 1's free against a commit");
  }
}

// ---- checkpoints ----

// Two matrices in two stores of a 4-rank job: a 50 x 40 double one (2 x 2
// grid, 8 x 6 blocks) and a 2 x 3 float one that ranks 2 and 3 own nothing of.
const MatrixLayout kHessian{50, 40, 8, 6, 2, 2};
const MatrixLayout kTiny{2, 3, 2, 2, 2, 2};
constexpr std::uint64_t kWrittenEpoch = 3;  // two commits, and the checkpoint's own

resurgo::Store open_store(const char* name) {
  return resurgo::Store(name, resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
}

// The stream a checkpointed matrix was assembled from, and its sum.
std::vector<Update> checkpoint_stream(const MatrixLayout& layout, std::uint64_t seed) {
  return make_stream(seed, 24, layout, Kind::kGeneral);
}

Reference sum_of(const std::vector<Update>& stream, const MatrixLayout& layout) {
  Reference reference{layout};
  for (const Update& update : stream) reference.add(update, Kind::kGeneral);
  return reference;
}

// Two commits: one halfway, one at the end.
template <typename T>
void fill(ConvergentMatrix<T>& matrix, const std::vector<Update>& stream) {
  for (std::size_t index = 0; index < stream.size(); ++index) {
    if (issues(static_cast<int>(index))) issue(matrix, stream[index], Kind::kGeneral);
    if (index == stream.size() / 2) matrix.commit();
  }
  matrix.commit();
}

template <typename T>
void write_one(const char* store_name, const MatrixLayout& layout, MatrixBackend backend, std::uint64_t seed) {
  resurgo::Store store = open_store(store_name);
  ConvergentMatrix<T> matrix(MPI_COMM_WORLD, layout, {.backend = backend});
  matrix.protect(store, 0);
  fill(matrix, checkpoint_stream(layout, seed));
  matrix.checkpoint(store, 1);
  check(matrix.stats().commits == kWrittenEpoch, std::string(store_name) + ": checkpoint commits");
  store.wait(resurgo::kAllVersions, resurgo::kL4);
  store.close();
}

template <typename T>
void restart_one(const char* store_name, const MatrixLayout& layout, MatrixBackend backend, std::uint64_t seed) {
  resurgo::Store store = open_store(store_name);
  ConvergentMatrix<T> matrix(MPI_COMM_WORLD, layout, {.backend = backend});
  matrix.protect(store, 0);
  const int restored = matrix.restart(store);
  check(restored == 1, std::string(store_name) + ": restored version " + std::to_string(restored));
  check(matrix.stats().commits == kWrittenEpoch, std::string(store_name) + ": the epoch is restored");
  const Reference reference = sum_of(checkpoint_stream(layout, seed), layout);
  check_against(matrix, reference, std::string(store_name) + " restarted");
  // The restarted matrix goes on converging.
  const std::vector<T> one{1};
  const std::vector<std::int64_t> last_row{layout.rows - 1};
  const std::vector<std::int64_t> last_col{layout.cols - 1};
  if (world_rank() == 1) matrix.update(one, last_row, last_col);
  matrix.commit();
  Reference after = reference;
  after.values.back() += 1;
  check_against(matrix, after, std::string(store_name) + " updated after restart");
  store.close();
}

template <typename T>
void restart_other_layout(const char* store_name, const MatrixLayout& layout, const std::vector<std::string>& named) {
  resurgo::Store store = open_store(store_name);
  ConvergentMatrix<T> matrix(MPI_COMM_WORLD, layout);
  matrix.protect(store, 0);
  expect_error<resurgo::MismatchError>([&] { matrix.restart(store); }, named,
                                       std::string(store_name) + " in another layout");
  check_against(matrix, Reference{layout}, std::string(store_name) + ": nothing was read into the other layout");
  store.close();
}

bool four_ranks() {
  check(world_size() == 4, "the checkpoint modes run on 4 ranks");
  return world_size() == 4;
}

void checkpoint_write() {
  if (!four_ranks()) return;
  write_one<double>("matrix-hessian", kHessian, MatrixBackend::kMessages, 11);
  write_one<float>("matrix-tiny", kTiny, MatrixBackend::kRma, 12);
}

void checkpoint_restart() {
  if (!four_ranks()) return;
  restart_one<double>("matrix-hessian", kHessian, MatrixBackend::kMessages, 11);
  restart_one<float>("matrix-tiny", kTiny, MatrixBackend::kRma, 12);
}

void checkpoint_other_layout() {
  if (!four_ranks()) return;
  MatrixLayout other_block = kHessian;
  other_block.row_block = 10;
  restart_other_layout<double>(
      "matrix-hessian", other_block,
      {"version 1 was written with row_block 8, this matrix has 10", "open the matrix with the layout"});
  restart_other_layout<double>("matrix-tiny", kTiny, {"version 1 was written with element bytes 4, this matrix has 8"});
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int provided = 0;
  MPI_Init_thread(&argc, &argv, mode == "serialized" ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE, &provided);
  try {
    const std::map<std::string, std::function<void()>> modes{
        {"assemble", [&] { assemble_all(std::vector<std::string>(argv + 2, argv + argc)); }},
        {"api", api},
        {"bad-input", bad_input},
        {"serialized", serialized},
        {"collective-mismatch", collective_mismatch},
        {"checkpoint-write", checkpoint_write},
        {"checkpoint-restart", checkpoint_restart},
        {"checkpoint-other-layout", checkpoint_other_layout},
    };
    const auto found = modes.find(mode);
    if (found == modes.end()) {
      check(false, "unknown mode '" + mode + "'");
    } else {
      found->second();
    }
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return resurgo::mpi_checks::finish_counted("matrix_check", mode);
}
