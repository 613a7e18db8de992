// ConvergentMatrix with a Store (public API only): the local array is one
// region; each version's metadata holds a MatrixRecord (matrix_record.h)
// with the epoch and the layout, which restart checks before reading.
#include <mpi.h>

#include <algorithm>
#include <optional>
#include <string>

#include "matrix/matrix_impl.h"
#include "matrix/mpi_call.h"
#include "resurgo/resurgo.hpp"

namespace resurgo {

namespace {

// Whether `version` was written by a matrix of another layout, agreed over
// the matrix's ranks: each reads its own file's header (describe, no data);
// a rank that cannot (a file lost with its node, rebuilt by restart) leaves
// the verdict to the others and to the check after restart. Throws the
// mismatch on every rank, so that none reads bytes of another layout.
void check_before_restart(Store& store, int version, const MatrixRecord& here, MPI_Comm comm) {
  int mismatch = 0;
  std::string why;
  try {
    check_same_layout(decode_record(store.describe(version).metadata, version), here, version);
  } catch (const MismatchError& error) {
    mismatch = 1;
    why = error.what();
  } catch (const FormatError& error) {
    mismatch = 1;
    why = error.what();
  } catch (const Error&) {
    // NotFoundError or CorruptionError here: restart may still find or rebuild the version.
  }
  int anywhere = 0;
  check_mpi(MPI_Allreduce(&mismatch, &anywhere, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  if (anywhere == 0) return;
  if (why.empty()) {
    why = "ConvergentMatrix::restart: version " + std::to_string(version) +
          " was written by a matrix of another layout (another rank's error names the field)";
  }
  throw MismatchError(why);
}

// The store's latest(), whose refusal of versions written by another rank
// count says how a matrix goes on there.
std::optional<int> latest_of(Store& store) {
  try {
    return store.latest();
  } catch (const StateError& error) {
    throw StateError(std::string(error.what()) +
                     " (ConvergentMatrix: to go on with another rank count or grid, read a file write_global() "
                     "wrote: read_global(), docs/matrix.md)");
  }
}

}  // namespace

template <typename T>
void ConvergentMatrix<T>::protect(Store& store, int id, const std::string& label) {
  impl_->require_live();
  // A rank that owns nothing protects its padding element: a store refuses
  // empty regions, and every rank's version needs the same region table.
  store.protect(id, impl_->backend->storage(), static_cast<std::size_t>(impl_->storage_elements()) * sizeof(T), label,
                ElementType{sizeof(T) == 4 ? "float32" : "float64", {impl_->local_cols(), impl_->leading_dimension()}});
}

template <typename T>
void ConvergentMatrix<T>::checkpoint(Store& store, int version) {
  impl_->commit();
  const std::vector<std::byte> record = encode_record(impl_->record());
  store.set_metadata(record.data(), record.size());
  store.checkpoint(version);
  // No rank's next update may reach an array another rank has not captured yet.
  check_mpi(MPI_Barrier(impl_->context.comm), "MPI_Barrier");
}

template <typename T>
int ConvergentMatrix<T>::restart(Store& store, int version) {
  impl_->require_live();
  impl_->require_settled("ConvergentMatrix::restart");
  const std::int64_t code = impl_->check.enter(CollectiveCall::kRestart);
  impl_->converge(code, "restart");  // nothing may land on the array while the store writes it
  const MatrixRecord here = impl_->record();
  const std::optional<int> candidate = version == kLatest ? latest_of(store) : std::optional<int>(version);
  if (candidate) check_before_restart(store, *candidate, here, impl_->context.comm);
  const int restored = store.restart(version);
  try {
    const MatrixRecord written = decode_record(store.metadata(), restored);
    check_same_layout(written, here, restored);
    impl_->stats.commits = written.epoch;
  } catch (const Error&) {
    // Another version than the one checked (restart fell back past a
    // damaged one) of another layout: its bytes mean nothing here.
    std::fill_n(impl_->backend->storage(), impl_->storage_elements(), T{0});
    throw;
  }
  impl_->converge(code, "restart");  // no rank updates an array another rank is still restoring
  return restored;
}

template void ConvergentMatrix<float>::protect(Store&, int, const std::string&);
template void ConvergentMatrix<double>::protect(Store&, int, const std::string&);
template void ConvergentMatrix<float>::checkpoint(Store&, int);
template void ConvergentMatrix<double>::checkpoint(Store&, int);
template int ConvergentMatrix<float>::restart(Store&, int);
template int ConvergentMatrix<double>::restart(Store&, int);

}  // namespace resurgo
