#include "matrix/message_backend.h"

#include <climits>
#include <string>

#include "matrix/backoff.h"
#include "matrix/bin_message.h"
#include "matrix/mpi_call.h"
#include "matrix/polite_wait.h"
#include "matrix/stopwatch.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr int kBinTag = 1;

}  // namespace

template <typename T>
MessageBackend<T>::MessageBackend(const MatrixContext& context)
    : context_(context),
      storage_(static_cast<std::size_t>(context.layout.storage_elements(context.rank)), T{0}),
      sends_(context.comm, kBinTag),
      bins_sent_to_(static_cast<std::size_t>(context.size), 0) {}

template <typename T>
void MessageBackend<T>::update(const UpdateSlice<T>& update, const UpdateBins& bins, std::span<const int> targets,
                               MatrixStats& stats) {
  // The whole update bounds each of its bins: refusing it here refuses it
  // before anything was sent.
  if (bin_words(update.rows.size(), update.cols.size(), sizeof(T)) > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgumentError("ConvergentMatrix::update: " + std::to_string(update.rows.size()) + " x " +
                               std::to_string(update.cols.size()) +
                               " values may make a message larger than MPI's count reaches (16 GiB): split the "
                               "update; nothing of it was applied");
  }
  for (const int target : targets) {
    const Stopwatch encoding;
    std::vector<std::uint64_t> message = encode_bin(update, bins.rows_of(target), bins.cols_of(target));
    stats.binning_seconds += encoding.seconds();
    const std::uint64_t elements = bins.rows_of(target).size() * bins.cols_of(target).size();
    if (target == context_.rank) {
      apply(message);
      stats.elements_local += elements;
      continue;
    }
    const std::size_t bytes = message.size() * sizeof(std::uint64_t);
    wait_for_room(bytes, stats);
    sends_.post(target, std::move(message));
    ++bins_sent_to_[static_cast<std::size_t>(target)];
    stats.elements_sent += elements;
    stats.bytes_sent += bytes;
  }
  progress();
}

template <typename T>
void MessageBackend<T>::wait_for_room(std::size_t bytes, MatrixStats& stats) {
  const auto full = [&] {
    return sends_.bytes_in_flight() > 0 && sends_.bytes_in_flight() + bytes > context_.options.max_in_flight_bytes;
  };
  if (!full()) return;
  const Stopwatch start;
  progress_until([&] { return !full(); });
  stats.backpressure_seconds += start.seconds();
}

template <typename T>
bool MessageBackend<T>::poll() {
  bool applied = false;
  while (receive_one()) applied = true;
  return applied;
}

template <typename T>
bool MessageBackend<T>::progress() {
  const bool sent = sends_.test();
  const bool applied = poll();
  return sent || applied;
}

template <typename T>
void MessageBackend<T>::progress_until(const std::function<bool()>& done) {
  Backoff backoff;
  while (!done()) {
    if (progress()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

template <typename T>
void MessageBackend<T>::converge() {
  std::uint64_t expected = 0;
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Ireduce_scatter_block(bins_sent_to_.data(), &expected, 1, MPI_UINT64_T, MPI_SUM, context_.comm, &request),
      "MPI_Ireduce_scatter_block");
  wait_politely(request, [this] { return progress(); });
  progress_until([&] { return bins_received_ >= expected && sends_.empty(); });
  check_mpi(MPI_Ibarrier(context_.comm, &request), "MPI_Ibarrier");
  wait_politely(request);
}

// The other thread may be between its probe and its receive: then this one
// leaves the message to it rather than wait.
template <typename T>
bool MessageBackend<T>::receive_one() {
  std::unique_lock<std::mutex> lock(receive_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  int arrived = 0;
  MPI_Status status;
  check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, kBinTag, context_.comm, &arrived, &status), "MPI_Iprobe");
  if (!arrived) return false;
  int words = 0;
  check_mpi(MPI_Get_count(&status, MPI_UINT64_T, &words), "MPI_Get_count");
  std::vector<std::uint64_t> message(static_cast<std::size_t>(std::max(words, 0)));
  check_mpi(MPI_Recv(message.data(), words, MPI_UINT64_T, status.MPI_SOURCE, kBinTag, context_.comm, MPI_STATUS_IGNORE),
            "MPI_Recv");
  lock.unlock();
  apply(message);
  ++bins_received_;
  return true;
}

template <typename T>
void MessageBackend<T>::apply(std::span<const std::uint64_t> message) {
  const std::lock_guard<std::mutex> lock(storage_mutex_);
  apply_bin(message, context_.layout, context_.rank, storage_.data());
}

template class MessageBackend<float>;
template class MessageBackend<double>;

}  // namespace resurgo
