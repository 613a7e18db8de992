// ConvergentMatrix: a distributed dense matrix in ScaLAPACK's 2-D
// block-cyclic layout that absorbs asynchronous `A[rows, cols] += values`
// updates from every rank and converges at a collective commit (the
// Hessian-assembly paper, papers/convergent-matrix-distributed-hessian-
// assembly.txt, section III; docs/matrix.md).
//
//   resurgo::ConvergentMatrix<float> hessian(MPI_COMM_WORLD, {.rows = n, .cols = n});
//   for (each computed update) hessian.update(values, rows, cols);  // returns at once
//   hessian.commit();                                                // collective
//   pssyev_(..., hessian.local_data(), &one, &one, hessian.descriptor(context).data(), ...);
//
// Include it only in code compiled with MPI; libresurgo provides it when it
// was built with MPI found (the serial readers of its global-layout files,
// global_file.hpp, need no MPI). The matrix talks on its own duplicate of the
// communicator, so its messages never match the application's.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "resurgo/global_file.hpp"  // MatrixOrder; the serial readers of write_global's files

namespace resurgo {

class Store;

// The global matrix and how it is dealt out: rows x cols elements in blocks
// of row_block x col_block, block (I, J) on process (I mod grid_rows,
// J mod grid_cols) of a grid_rows x grid_cols grid. Rank r of the
// communicator is grid process (r / grid_cols, r mod grid_cols): the
// row-major order of Cblacs_gridinit(&context, "Row", grid_rows, grid_cols).
// grid_rows = grid_cols = 0 picks the most nearly square grid
// (MPI_Dims_create); both must otherwise be given, and multiply to the
// communicator's size. The first block row and column are on process (0, 0).
struct MatrixLayout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_block = 64;
  std::int64_t col_block = 64;
  int grid_rows = 0;
  int grid_cols = 0;
};

enum class MatrixBackend {
  // The paper's design: each update is binned by owner and each bin sent at
  // once with a non-blocking send; the owner applies a bin as a whole.
  kMessages,
  // Section IV-B's comparison: one MPI window over the local blocks,
  // MPI_Accumulate(MPI_SUM) of an indexed datatype per bin under an
  // exclusive lock of the target.
  kRma,
};

enum class MatrixProgress {
  kAuto,    // a thread where MPI_THREAD_MULTIPLE is provided, else kInline
  kThread,  // a progress thread; InvalidArgumentError without MPI_THREAD_MULTIPLE
  kInline,  // incoming bins are applied only inside update(), commit() and progress()
};

// The order in which an update visits its targets (the owners of its
// elements). kRandom, each rank its own random order (seeded by
// MatrixOptions::seed), keeps ranks that update at the same rate from all
// sending to one owner at once (the paper's section III-C2); kFixed visits
// them in rank order on every rank, the worst case, for measuring that
// (bench/matrix.py --experiment part4).
enum class MatrixTargetOrder { kRandom, kFixed };

struct MatrixOptions {
  MatrixBackend backend = MatrixBackend::kMessages;
  MatrixProgress progress = MatrixProgress::kAuto;
  // With kMessages, caps both the updates update() has copied and not yet
  // sent, and the bytes of this rank's sent bins whose sends have not
  // completed. update() waits (progressing meanwhile) only when the copies
  // reach the cap; an update larger than the cap waits for an empty queue.
  // The receivers' memory is bounded by the senders' caps.
  std::size_t max_in_flight_bytes = std::size_t{64} << 20;
  // Seeds the random order in which an update visits its targets (each rank
  // mixes in its rank, so no two ranks follow the same order).
  std::uint64_t seed = 0x5eed;
  // Debug check: every collective call (commit, reset, restart, free)
  // compares its call count and kind across the ranks and throws
  // StateError on every rank when some rank is at another call (without
  // the check a rank at another call is taken for this one, as any
  // collective would).
  bool check_collective = false;
  // Seconds update() may wait for room under max_in_flight_bytes, and
  // commit() for the other ranks, before it throws StateError naming the
  // ranks it waits for (a rank that never calls commit(), or whose bins do
  // not arrive); 0: no limit. A commit() that timed out goes on where it
  // stopped when called again (nothing else may come before it ends); an
  // update() that timed out was not taken.
  double timeout_seconds = 0;
  // Random (the default) or fixed; see MatrixTargetOrder. Last, so that the
  // options' positional initializers stay valid.
  MatrixTargetOrder target_order = MatrixTargetOrder::kRandom;
};

// What this rank did since construction (or the last reset of the counters
// by reset()). The seconds but binning_seconds are the application
// thread's.
struct MatrixStats {
  std::uint64_t updates = 0;            // update calls
  std::uint64_t elements_sent = 0;      // elements sent to other ranks (one triangle of a symmetric update)
  std::uint64_t elements_local = 0;     // elements this rank owned itself
  std::uint64_t bytes_sent = 0;         // message bytes sent (indices + values)
  std::uint64_t bins_received = 0;      // bins applied here for other ranks
  double update_seconds = 0;            // in update(): checking, copying (kMessages), waiting for room
  // Sorting elements by owner and packing bins, on whichever thread did it:
  // with kMessages and a progress thread, mostly that thread (not part of
  // update_seconds); else inside update().
  double binning_seconds = 0;
  double backpressure_seconds = 0;      // of update_seconds: waiting for room under max_in_flight_bytes
  double commit_seconds = 0;            // in commit()
  std::uint64_t commits = 0;            // the epoch: commits since construction
};

// T is float or double.
template <typename T>
class ConvergentMatrix {
 public:
  // Collective over `comm`. InvalidArgumentError for a size or block < 1, a
  // grid whose product is not the communicator's size, or MatrixProgress::kThread
  // without MPI_THREAD_MULTIPLE. Local storage starts at zero.
  ConvergentMatrix(MPI_Comm comm, const MatrixLayout& layout, const MatrixOptions& options = {});
  // free(), if not yet called: collective like it.
  ~ConvergentMatrix();
  ConvergentMatrix(const ConvergentMatrix&) = delete;
  ConvergentMatrix& operator=(const ConvergentMatrix&) = delete;

  // A[rows[i], cols[j]] += values[i * cols.size() + j] (values row-major,
  // as a C-ordered NumPy array), atomically at each owner with respect to
  // every other update. Index arrays may be in any order and hold
  // duplicates (their contributions are summed). Returns once the update is
  // copied (kMessages; the progress thread bins and sends it) or its bins
  // accumulated (kRma); `values`, `rows` and `cols` may be reused at once.
  // Indices are checked first: one out of range throws InvalidArgumentError
  // naming it and the bound, and nothing of the update is applied; so does
  // values.size() != rows.size() * cols.size().
  void update(std::span<const T> values, std::span<const std::int64_t> rows, std::span<const std::int64_t> cols);
  // The upper triangle of A[ix, ix] += values (n x n row-major, n =
  // ix.size()): element (i, j) is added only where ix[i] <= ix[j], so a
  // symmetric update touches each global element of the upper triangle once.
  // Only those values travel: the owner knows from the indices which pairs
  // they belong to, and adds them as update() of the whole square with the
  // other pairs skipped would, to the bit.
  void update_symmetric(std::span<const T> values, std::span<const std::int64_t> ix);
  // A[rows[i], 0] += values[i]: the gradient, a matrix of one column.
  // InvalidArgumentError when the matrix has more than one column.
  void update_vector(std::span<const T> values, std::span<const std::int64_t> rows);

  // Collective: returns on each rank once every update issued before it,
  // on any rank, has been applied to this rank's part (and every rank has
  // entered it). Ranks may have issued any number of updates, none
  // included, and may own no element. With
  // MatrixOptions::timeout_seconds, StateError naming the ranks still
  // waited for once it has passed.
  void commit();
  // Applies what has arrived for this rank, without waiting (for codes
  // with MatrixProgress::kInline that compute long between updates).
  void progress();
  // Collective: commit(), then every element is zero and the statistics
  // start again (the epoch is kept).
  void reset();
  // Collective: releases the window, the progress thread and the storage.
  // Any later call but the destructor throws StateError.
  void free();

  const MatrixLayout& layout() const;  // grid_rows and grid_cols filled in
  int grid_row() const;                // this rank's place in the grid
  int grid_col() const;
  // This rank's part: local_rows() x local_cols() elements, column-major
  // with leading dimension leading_dimension() = max(1, local_rows()),
  // exactly ScaLAPACK's local array. Read it after commit().
  T* local_data();
  const T* local_data() const;
  std::int64_t local_rows() const;
  std::int64_t local_cols() const;
  std::int64_t leading_dimension() const;
  // ScaLAPACK's array descriptor {DTYPE=1, context, M, N, MB, NB, RSRC=0,
  // CSRC=0, LLD} for a BLACS grid made with Cblacs_gridinit(&context,
  // "Row", grid_rows, grid_cols) over the same ranks.
  std::array<int, 9> descriptor(int blacs_context) const;
  // Whether global element (row, col) is stored here, which rank stores it,
  // and its value (after commit(); InvalidArgumentError when not stored here
  // or out of range).
  bool owns(std::int64_t row, std::int64_t col) const;
  int owner(std::int64_t row, std::int64_t col) const;
  T at(std::int64_t row, std::int64_t col) const;

  // Checkpoints (docs/matrix.md): protect() registers the local part as
  // region `id` of `store` (an MPI store of the same ranks); checkpoint()
  // commits, records the epoch and layout in the store's metadata and
  // checkpoints `version`; restart() restores a version (kLatest: the newest
  // intact one) into the local part and the epoch, after checking that the
  // version was written by a matrix of the same layout (MismatchError
  // otherwise). Each is collective.
  void protect(Store& store, int id, const std::string& label = "matrix");
  void checkpoint(Store& store, int version);
  int restart(Store& store, int version = -1);  // -1: kLatest

  // Global-layout files (docs/matrix.md, "Global-layout files"): the whole
  // matrix in one file, in global row- or column-major order, with a header
  // (shape, element type, order, epoch) and a checksum per 1 MiB part of the
  // data. write_global() commits, then every rank writes its own lines, or a
  // slab of the file whose elements their owners send it, with MPI-IO into
  // a temporary file (created O_EXCL,
  // O_NOFOLLOW, mode 0600) that rank 0 renames to `path` once every rank's
  // bytes are synced: `path` is then either the old file, or none, or the
  // whole new one. read_global() reads such a file into a matrix of the same
  // shape and element type on any grid, rank count and block size, each rank
  // reading its own lines or a slab it sends on to the owners, and takes the
  // file's epoch (a restart on
  // another grid). Refused before any element is read (on every rank, the
  // matrix unchanged): a file of another shape or element type
  // (MismatchError naming the file and both values), no such file
  // (NotFoundError), no global-layout file (FormatError), a damaged header or
  // a file of the wrong size (CorruptionError). A part whose checksum does
  // not match throws CorruptionError naming the file and the part, and leaves
  // the matrix zeroed. Each is collective; the sizes must fit MPI's int
  // (InvalidArgumentError otherwise).
  void write_global(const std::string& path, MatrixOrder order = MatrixOrder::kColumnMajor);
  void read_global(const std::string& path);

  MatrixStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

extern template class ConvergentMatrix<float>;
extern template class ConvergentMatrix<double>;

}  // namespace resurgo
