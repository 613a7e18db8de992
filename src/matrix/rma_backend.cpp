#include "matrix/rma_backend.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "matrix/mpi_call.h"
#include "matrix/stopwatch.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// Every rank checks every rank's size, so all of them refuse together.
void check_window_fits(const BlockCyclic& layout, int size) {
  for (int rank = 0; rank < size; ++rank) {
    const std::int64_t elements = layout.storage_elements(rank);
    if (elements <= INT_MAX) continue;
    throw InvalidArgumentError("ConvergentMatrix: with MatrixBackend::kRma rank " + std::to_string(rank) +
                               " would hold " + std::to_string(elements) +
                               " elements, more than an MPI window's int displacements reach (" +
                               std::to_string(INT_MAX) + "): use MatrixBackend::kMessages or more ranks");
  }
}

// One target's bin as an accumulate needs it: each element's displacement
// in the target's local array with its value, ascending and with the values
// of equal displacements summed here (MPI_Accumulate to one location twice
// in one call is not something to rely on).
template <typename T>
struct IndexedBin {
  std::vector<int> displacements;
  std::vector<T> values;
};

template <typename T>
IndexedBin<T> index_bin(const UpdateSlice<T>& update, const BlockCyclic& layout, std::span<const std::size_t> rows,
                        std::span<const std::size_t> cols) {
  std::vector<std::pair<std::int64_t, T>> elements;
  elements.reserve(rows.size() * cols.size());
  for (const std::size_t i : rows) {
    for (const std::size_t j : cols) {
      if (update.upper_only && update.rows[i] > update.cols[j]) continue;
      elements.emplace_back(layout.local_offset(update.rows[i], update.cols[j]),
                            update.values[i * update.cols.size() + j]);
    }
  }
  std::sort(elements.begin(), elements.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  IndexedBin<T> bin;
  for (const auto& [offset, value] : elements) {
    if (!bin.displacements.empty() && bin.displacements.back() == offset) {
      bin.values.back() += value;
      continue;
    }
    bin.displacements.push_back(static_cast<int>(offset));  // < INT_MAX: check_window_fits
    bin.values.push_back(value);
  }
  return bin;
}

}  // namespace

template <typename T>
RmaBackend<T>::RmaBackend(const MatrixContext& context)
    : context_(context), order_(context.options.seed, context.rank, context.options.target_order) {
  check_window_fits(context.layout, context.size);
  const std::int64_t elements = context.layout.storage_elements(context.rank);
  check_mpi(MPI_Win_allocate(static_cast<MPI_Aint>(elements) * static_cast<MPI_Aint>(sizeof(T)), sizeof(T),
                             MPI_INFO_NULL, context.comm, &base_, &window_),
            "MPI_Win_allocate");
  std::fill(base_, base_ + elements, T{0});
  synchronize();
  // No rank accumulates into an array not yet zeroed.
  check_mpi(MPI_Barrier(context.comm), "MPI_Barrier");
}

template <typename T>
RmaBackend<T>::~RmaBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Win_free(&window_);
}

template <typename T>
void RmaBackend<T>::update(const char*, const UpdateSlice<T>& update, MatrixStats&, const Deadline&) {
  const Stopwatch binning;
  const UpdateBins bins(context_.layout, update.rows, update.cols, update.upper_only);
  std::vector<int> targets = bins.targets();
  order_.arrange(targets);
  counters_.binning_seconds += binning.seconds();
  for (const int target : targets) {
    const Stopwatch indexing;
    const IndexedBin<T> bin = index_bin(update, context_.layout, bins.rows_of(target), bins.cols_of(target));
    counters_.binning_seconds += indexing.seconds();
    const int count = static_cast<int>(bin.values.size());
    MPI_Datatype places = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_create_indexed_block(count, 1, bin.displacements.data(), mpi_type<T>(), &places),
              "MPI_Type_create_indexed_block");
    check_mpi(MPI_Type_commit(&places), "MPI_Type_commit");
    check_mpi(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, window_), "MPI_Win_lock");
    check_mpi(MPI_Accumulate(bin.values.data(), count, mpi_type<T>(), target, 0, 1, places, MPI_SUM, window_),
              "MPI_Accumulate");
    check_mpi(MPI_Win_unlock(target, window_), "MPI_Win_unlock");
    MPI_Type_free(&places);
    if (target == context_.rank) {
      counters_.elements_local += bin.values.size();
    } else {
      counters_.elements_sent += bin.values.size();
      counters_.bytes_sent += bin.values.size() * (sizeof(T) + sizeof(int));
    }
  }
}

template <typename T>
void RmaBackend<T>::add_counters(MatrixStats& stats) const {
  stats.elements_sent += counters_.elements_sent;
  stats.elements_local += counters_.elements_local;
  stats.bytes_sent += counters_.bytes_sent;
  stats.binning_seconds += counters_.binning_seconds;
}

template <typename T>
bool RmaBackend<T>::progress() {
  int arrived = 0;
  check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, context_.comm, &arrived, MPI_STATUS_IGNORE), "MPI_Iprobe");
  return false;
}

template <typename T>
void RmaBackend<T>::synchronize() {
  check_mpi(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, context_.rank, 0, window_), "MPI_Win_lock");
  check_mpi(MPI_Win_sync(window_), "MPI_Win_sync");
  check_mpi(MPI_Win_unlock(context_.rank, window_), "MPI_Win_unlock");
}

template class RmaBackend<float>;
template class RmaBackend<double>;

}  // namespace resurgo
