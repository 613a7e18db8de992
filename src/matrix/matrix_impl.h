// ConvergentMatrix's state, shared by the facade (convergent_matrix.cpp) and
// its Store integration (matrix_checkpoint.cpp).
#pragma once

#include <memory>

#include "matrix/collective_check.h"
#include "matrix/convergence.h"
#include "matrix/matrix_record.h"
#include "matrix/progress_thread.h"
#include "matrix/update_backend.h"
#include "resurgo/matrix.hpp"

namespace resurgo {

template <typename T>
class ConvergentMatrix<T>::Impl {
 public:
  // Collective (MPI_Comm_dup). Checks the layout and options before any
  // collective call, so that every rank throws alike.
  Impl(MPI_Comm comm, const MatrixLayout& layout, const MatrixOptions& options);
  // free() if still live; errors are swallowed (a destructor must not throw).
  ~Impl();

  // StateError once free() was called; then the progress thread's error, if any.
  void require_live();
  // StateError while a commit() that timed out is still pending: `call`
  // may not come before it ends.
  void require_settled(const char* call) const;
  void update(const char* call, const UpdateSlice<T>& update, const char* rows_name, const char* cols_name);
  void commit();
  void reset();
  void free();
  // A convergence (convergence.h) for collective call `call`, whose code
  // check.enter() gave, waiting as long as it takes: reset(), restart() and
  // free() have no time limit.
  void converge(std::int64_t code, const char* call);
  // Local storage as ScaLAPACK sees it, and with the padding element a rank
  // owning nothing still has.
  std::int64_t local_rows() const { return context.layout.rows().local_extent(grid_row()); }
  std::int64_t local_cols() const { return context.layout.cols().local_extent(grid_col()); }
  std::int64_t leading_dimension() const { return context.layout.leading_dimension(grid_row()); }
  std::int64_t storage_elements() const { return context.layout.storage_elements(context.rank); }
  int grid_row() const { return context.layout.grid_row_of(context.rank); }
  int grid_col() const { return context.layout.grid_col_of(context.rank); }
  // What checkpoint() records and restart() compares.
  MatrixRecord record() const { return MatrixRecord{stats.commits, context.layout.layout(), sizeof(T)}; }
  // InvalidArgumentError unless (row, col) lies in the matrix.
  void check_element(const char* call, std::int64_t row, std::int64_t col) const;

  MatrixContext context;
  CollectiveCheck check;
  Convergence convergence;
  std::unique_ptr<UpdateBackend<T>> backend;
  std::unique_ptr<ProgressThread> progress_thread;  // after backend: stopped before it goes
  MatrixStats stats;  // what the application thread counted (the backend counts the rest)
  bool freed = false;
};

}  // namespace resurgo
