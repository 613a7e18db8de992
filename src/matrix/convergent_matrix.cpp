// The ConvergentMatrix facade: checks arguments, numbers collective calls,
// measures time, and hands the work to the backend the options chose.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

#include "base/log.h"
#include "matrix/matrix_impl.h"
#include "matrix/message_backend.h"
#include "matrix/mpi_call.h"
#include "matrix/rma_backend.h"
#include "matrix/stopwatch.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// The layout with its grid filled in, or InvalidArgumentError.
MatrixLayout resolve_layout(MatrixLayout layout, int size) {
  const auto refuse = [](const std::string& why) { throw InvalidArgumentError("ConvergentMatrix: " + why); };
  if (layout.rows < 1 || layout.cols < 1) {
    refuse("the matrix is " + std::to_string(layout.rows) + " x " + std::to_string(layout.cols) +
           "; both sizes must be at least 1");
  }
  if (layout.row_block < 1 || layout.col_block < 1) {
    refuse("blocks of " + std::to_string(layout.row_block) + " x " + std::to_string(layout.col_block) +
           "; both block sizes must be at least 1");
  }
  if (layout.grid_rows == 0 && layout.grid_cols == 0) {
    int dims[2] = {0, 0};
    check_mpi(MPI_Dims_create(size, 2, dims), "MPI_Dims_create");
    layout.grid_rows = dims[0];
    layout.grid_cols = dims[1];
  }
  if (layout.grid_rows < 1 || layout.grid_cols < 1 ||
      static_cast<std::int64_t>(layout.grid_rows) * layout.grid_cols != size) {
    refuse("a grid of " + std::to_string(layout.grid_rows) + " x " + std::to_string(layout.grid_cols) +
           " processes on a communicator of " + std::to_string(size) +
           " ranks: give a grid whose product is the communicator's size, or 0 x 0 for the most nearly square one");
  }
  return layout;
}

MatrixProgress resolve_progress(MatrixProgress asked) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  const bool threads_may_call = provided == MPI_THREAD_MULTIPLE;
  if (asked == MatrixProgress::kThread && !threads_may_call) {
    throw InvalidArgumentError(
        "ConvergentMatrix: MatrixProgress::kThread needs MPI_THREAD_MULTIPLE (initialize MPI "
        "with MPI_Init_thread asking for it) or MatrixProgress::kInline");
  }
  if (asked == MatrixProgress::kAuto) return threads_may_call ? MatrixProgress::kThread : MatrixProgress::kInline;
  return asked;
}

// Everything is checked before the duplicate, the first collective call.
MatrixContext open_context(MPI_Comm comm, const MatrixLayout& layout, MatrixOptions options) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw StateError(
        "ConvergentMatrix: MPI is not initialized (call MPI_Init_thread first, and free matrices "
        "before MPI_Finalize)");
  }
  if (comm == MPI_COMM_NULL) throw InvalidArgumentError("ConvergentMatrix: the communicator is MPI_COMM_NULL");
  if (!(options.timeout_seconds >= 0)) {
    throw InvalidArgumentError("ConvergentMatrix: timeout_seconds is " + Deadline(options.timeout_seconds).text() +
                               "; give seconds >= 0 (0: no limit)");
  }
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const MatrixLayout resolved = resolve_layout(layout, size);
  options.progress = resolve_progress(options.progress);
  MPI_Comm own = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &own), "MPI_Comm_dup");
  int rank = 0;
  MPI_Comm_rank(own, &rank);
  return MatrixContext{own, rank, size, BlockCyclic(resolved), options};
}

template <typename T>
std::unique_ptr<UpdateBackend<T>> make_backend(const MatrixContext& context) {
  if (context.options.backend == MatrixBackend::kRma) return std::make_unique<RmaBackend<T>>(context);
  return std::make_unique<MessageBackend<T>>(context);
}

}  // namespace

template <typename T>
ConvergentMatrix<T>::Impl::Impl(MPI_Comm comm, const MatrixLayout& layout, const MatrixOptions& options)
    : context(open_context(comm, layout, options)),
      check(options.check_collective),
      convergence(context.comm, context.rank) {
  try {
    backend = make_backend<T>(context);
  } catch (...) {
    MPI_Comm_free(&context.comm);
    throw;
  }
  if (context.options.progress == MatrixProgress::kThread) {
    progress_thread = std::make_unique<ProgressThread>([this] { return backend->progress(); });
  }
}

template <typename T>
ConvergentMatrix<T>::Impl::~Impl() {
  if (freed) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // nothing collective is possible any more; the members release what is local
  try {
    free();
  } catch (const std::exception& error) {
    // A destructor must not throw: say why the matrix was not freed.
    Logger("matrix", LogLevel::kError)
        .error(std::string("ConvergentMatrix: free() in the destructor failed: ") + error.what());
  }
}

template <typename T>
void ConvergentMatrix<T>::Impl::require_live() {
  if (freed) throw StateError("ConvergentMatrix: used after free()");
  if (progress_thread) progress_thread->rethrow_failure();
}

template <typename T>
void ConvergentMatrix<T>::Impl::require_settled(const char* call) const {
  if (!convergence.pending()) return;
  throw StateError(std::string(call) +
                   ": a commit() that timed out has not completed: call commit() again until it returns (every "
                   "rank must), or end the job (MPI_Abort)");
}

template <typename T>
void ConvergentMatrix<T>::Impl::update(const char* call, const UpdateSlice<T>& slice, const char* rows_name,
                                       const char* cols_name) {
  require_live();
  require_settled(call);
  const Stopwatch start;
  check_value_count(call, slice.values.size(), slice.rows.size(), slice.cols.size());
  check_indices(call, rows_name, slice.rows, context.layout.layout().rows);
  check_indices(call, cols_name, slice.cols, context.layout.layout().cols);
  backend->update(call, slice, stats, Deadline(context.options.timeout_seconds));
  ++stats.updates;
  stats.update_seconds += start.seconds();
}

template <typename T>
void ConvergentMatrix<T>::Impl::converge(std::int64_t code, const char* call) {
  convergence.run(*backend, check, code, call, Deadline());
}

// A commit that timed out goes on where it stopped, under the code its first
// call drew.
template <typename T>
void ConvergentMatrix<T>::Impl::commit() {
  require_live();
  const Stopwatch start;
  const std::int64_t code = convergence.pending() ? 0 : check.enter(CollectiveCall::kCommit);
  convergence.run(*backend, check, code, "commit", Deadline(context.options.timeout_seconds));
  ++stats.commits;
  stats.commit_seconds += start.seconds();
}

// Zeroes between two convergences: the first so that no bin is still on its
// way, the second so that no rank sends a new one before every rank zeroed.
template <typename T>
void ConvergentMatrix<T>::Impl::reset() {
  require_live();
  require_settled("ConvergentMatrix::reset");
  const std::int64_t code = check.enter(CollectiveCall::kReset);
  converge(code, "reset");
  std::fill_n(backend->storage(), storage_elements(), T{0});
  converge(code, "reset");
  const std::uint64_t epoch = stats.commits + 1;  // reset commits first
  stats = MatrixStats{};
  stats.commits = epoch;
  backend->clear_counters();
}

template <typename T>
void ConvergentMatrix<T>::Impl::free() {
  if (freed) throw StateError("ConvergentMatrix: used after free()");
  require_settled("ConvergentMatrix::free");
  // No bin may still be on its way to a rank that stops listening.
  converge(check.enter(CollectiveCall::kFree), "free");
  progress_thread.reset();
  backend.reset();
  check_mpi(MPI_Comm_free(&context.comm), "MPI_Comm_free");
  freed = true;
}

template <typename T>
void ConvergentMatrix<T>::Impl::check_element(const char* call, std::int64_t row, std::int64_t col) const {
  const MatrixLayout& layout = context.layout.layout();
  if (row >= 0 && row < layout.rows && col >= 0 && col < layout.cols) return;
  throw InvalidArgumentError(std::string(call) + ": element (" + std::to_string(row) + ", " + std::to_string(col) +
                             ") is outside the " + std::to_string(layout.rows) + " x " + std::to_string(layout.cols) +
                             " matrix");
}

template <typename T>
ConvergentMatrix<T>::ConvergentMatrix(MPI_Comm comm, const MatrixLayout& layout, const MatrixOptions& options)
    : impl_(std::make_unique<Impl>(comm, layout, options)) {}

template <typename T>
ConvergentMatrix<T>::~ConvergentMatrix() = default;

template <typename T>
void ConvergentMatrix<T>::update(std::span<const T> values, std::span<const std::int64_t> rows,
                                 std::span<const std::int64_t> cols) {
  impl_->update("ConvergentMatrix::update", {values, rows, cols, false}, "rows", "cols");
}

template <typename T>
void ConvergentMatrix<T>::update_symmetric(std::span<const T> values, std::span<const std::int64_t> ix) {
  impl_->update("ConvergentMatrix::update_symmetric", {values, ix, ix, true}, "ix", "ix");
}

template <typename T>
void ConvergentMatrix<T>::update_vector(std::span<const T> values, std::span<const std::int64_t> rows) {
  impl_->require_live();
  const std::int64_t cols = impl_->context.layout.layout().cols;
  if (cols != 1) {
    throw InvalidArgumentError("ConvergentMatrix::update_vector: this matrix has " + std::to_string(cols) +
                               " columns; update_vector adds to a matrix of one column (use update() with one "
                               "column index instead)");
  }
  static constexpr std::int64_t kOnlyColumn[] = {0};
  impl_->update("ConvergentMatrix::update_vector", {values, rows, kOnlyColumn, false}, "rows", "cols");
}

template <typename T>
void ConvergentMatrix<T>::commit() {
  impl_->commit();
}

template <typename T>
void ConvergentMatrix<T>::progress() {
  impl_->require_live();
  impl_->backend->progress();
}

template <typename T>
void ConvergentMatrix<T>::reset() {
  impl_->reset();
}

template <typename T>
void ConvergentMatrix<T>::free() {
  impl_->free();
}

template <typename T>
const MatrixLayout& ConvergentMatrix<T>::layout() const {
  impl_->require_live();
  return impl_->context.layout.layout();
}

template <typename T>
int ConvergentMatrix<T>::grid_row() const {
  impl_->require_live();
  return impl_->grid_row();
}

template <typename T>
int ConvergentMatrix<T>::grid_col() const {
  impl_->require_live();
  return impl_->grid_col();
}

template <typename T>
T* ConvergentMatrix<T>::local_data() {
  impl_->require_live();
  return impl_->backend->storage();
}

template <typename T>
const T* ConvergentMatrix<T>::local_data() const {
  impl_->require_live();
  return impl_->backend->storage();
}

template <typename T>
std::int64_t ConvergentMatrix<T>::local_rows() const {
  impl_->require_live();
  return impl_->local_rows();
}

template <typename T>
std::int64_t ConvergentMatrix<T>::local_cols() const {
  impl_->require_live();
  return impl_->local_cols();
}

template <typename T>
std::int64_t ConvergentMatrix<T>::leading_dimension() const {
  impl_->require_live();
  return impl_->leading_dimension();
}

template <typename T>
std::array<int, 9> ConvergentMatrix<T>::descriptor(int blacs_context) const {
  impl_->require_live();
  const MatrixLayout& layout = impl_->context.layout.layout();
  const std::int64_t lld = impl_->leading_dimension();
  for (const std::int64_t value : {layout.rows, layout.cols, layout.row_block, layout.col_block, lld}) {
    if (value > INT_MAX) {
      throw InvalidArgumentError("ConvergentMatrix::descriptor: " + std::to_string(value) +
                                 " does not fit the descriptor's int (ScaLAPACK's 32-bit interface)");
    }
  }
  const auto as_int = [](std::int64_t value) { return static_cast<int>(value); };
  return {1, blacs_context, as_int(layout.rows), as_int(layout.cols), as_int(layout.row_block),
          as_int(layout.col_block), 0, 0, as_int(lld)};
}

template <typename T>
bool ConvergentMatrix<T>::owns(std::int64_t row, std::int64_t col) const {
  return owner(row, col) == impl_->context.rank;
}

template <typename T>
int ConvergentMatrix<T>::owner(std::int64_t row, std::int64_t col) const {
  impl_->require_live();
  impl_->check_element("ConvergentMatrix::owner", row, col);
  return impl_->context.layout.owner(row, col);
}

template <typename T>
T ConvergentMatrix<T>::at(std::int64_t row, std::int64_t col) const {
  impl_->require_live();
  impl_->check_element("ConvergentMatrix::at", row, col);
  const int owner = impl_->context.layout.owner(row, col);
  if (owner != impl_->context.rank) {
    throw InvalidArgumentError("ConvergentMatrix::at: element (" + std::to_string(row) + ", " + std::to_string(col) +
                               ") is stored on rank " + std::to_string(owner) + ", not on rank " +
                               std::to_string(impl_->context.rank) + ": read it there (owner() says where)");
  }
  return impl_->backend->storage()[impl_->context.layout.local_offset(row, col)];
}

template <typename T>
MatrixStats ConvergentMatrix<T>::stats() const {
  impl_->require_live();
  MatrixStats stats = impl_->stats;
  impl_->backend->add_counters(stats);
  return stats;
}

template class ConvergentMatrix<float>;
template class ConvergentMatrix<double>;

}  // namespace resurgo
