#include "matrix/message_backend.h"

#include <algorithm>
#include <climits>
#include <numeric>
#include <string>

#include "matrix/convergence.h"
#include "matrix/mpi_call.h"
#include "matrix/stopwatch.h"
#include "resurgo/errors.hpp"

namespace resurgo {

template <typename T>
MessageBackend<T>::Outgoing::Outgoing(const QueuedUpdate<T>& queued, const BlockCyclic& layout, TargetOrder& order,
                                      int rank)
    : update(queued.slice()), bins(layout, update.rows, update.cols, update.upper_only), targets(bins.targets()) {
  order.arrange(targets);
  // This rank's own bin last: the others' owners can add theirs meanwhile.
  std::stable_partition(targets.begin(), targets.end(), [own = rank](int target) { return target != own; });
}

template <typename T>
MessageBackend<T>::MessageBackend(const MatrixContext& context)
    : context_(context),
      storage_(static_cast<std::size_t>(context.layout.storage_elements(context.rank)), T{0}),
      applied_from_(static_cast<std::size_t>(context.size), 0),
      queue_(context.options.max_in_flight_bytes),
      sends_(context.comm, kBinTag, context.options.max_in_flight_bytes),
      sent_to_(static_cast<std::size_t>(context.size), 0),
      order_(context.options.seed, context.rank, context.options.target_order) {}

template <typename T>
void MessageBackend<T>::update(const char* call, const UpdateSlice<T>& update, MatrixStats& stats,
                               const Deadline& deadline) {
  // The whole update bounds each of its bins: refusing it here refuses it
  // before anything was sent.
  const std::size_t rows = update.rows.size();
  const std::size_t cols = update.cols.size();
  if (bin_words(rows + cols, update.values.size(), sizeof(T)) > static_cast<std::size_t>(INT_MAX)) {
    throw InvalidArgumentError(std::string(call) + ": " + std::to_string(rows) + " x " + std::to_string(cols) +
                               " values may make a message larger than MPI's count reaches (16 GiB): split the "
                               "update; nothing of it was applied");
  }
  const std::size_t bytes = QueuedUpdate<T>::bytes_of(update);
  if (!queue_.has_room(bytes)) {
    const Stopwatch waiting;
    const bool room = wait_until([&] { return queue_.has_room(bytes); }, [this] { return progress(); }, deadline);
    stats.backpressure_seconds += waiting.seconds();
    if (!room) {
      throw StateError(std::string(call) + ": after " + deadline.text() +
                       " (MatrixOptions::timeout_seconds) the updates queued on this rank still fill "
                       "max_in_flight_bytes (" +
                       std::to_string(context_.options.max_in_flight_bytes) + "): " + waiting_for({}) +
                       "; nothing of this update was applied: call it again to go on waiting, or end the job "
                       "(MPI_Abort)");
    }
  }
  queue_.push_copy(update);
  if (context_.options.progress != MatrixProgress::kThread) progress();
}

template <typename T>
bool MessageBackend<T>::progress_owed(const std::function<std::uint64_t(int)>& count_from) {
  const bool sent = send_queued();
  bool applied = false;
  while (receive_next(count_from)) applied = true;
  return sent || applied;
}

template <typename T>
bool MessageBackend<T>::send_queued() {
  std::unique_lock<std::mutex> lock(send_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool moved = sends_.test();
  for (;;) {
    if (!outgoing_) {
      const QueuedUpdate<T>* front = queue_.front();
      if (front == nullptr) break;
      const Stopwatch binning;
      outgoing_.emplace(*front, context_.layout, order_, context_.rank);
      counters_.binning_seconds += binning.seconds();
    }
    if (outgoing_->next == outgoing_->targets.size()) {
      outgoing_.reset();
      queue_.pop_front();
      moved = true;
      continue;
    }
    if (!send_next_bin(*outgoing_)) break;
    moved = true;
  }
  return moved;
}

template <typename T>
bool MessageBackend<T>::send_next_bin(Outgoing& outgoing) {
  const int target = outgoing.targets[outgoing.next];
  if (outgoing.bin.words.empty()) {
    const Stopwatch encoding;
    outgoing.bin =
        encode_bin(outgoing.update, outgoing.bins.rows_of(target), outgoing.bins.cols_of(target), sends_.spare());
    counters_.binning_seconds += encoding.seconds();
  }
  if (target == context_.rank) {
    apply(outgoing.bin.words, target);
    counters_.elements_local += outgoing.bin.values;
    sends_.keep(std::move(outgoing.bin.words));
  } else {
    // Room under the cap, or nothing in flight: a larger bin goes alone.
    const std::size_t bytes = outgoing.bin.words.size() * sizeof(std::uint64_t);
    const std::size_t in_flight = sends_.bytes_in_flight();
    if (in_flight > 0 && in_flight + bytes > context_.options.max_in_flight_bytes) return false;
    sends_.post(target, std::move(outgoing.bin.words));
    ++sent_to_[static_cast<std::size_t>(target)];
    counters_.elements_sent += outgoing.bin.values;
    counters_.bytes_sent += bytes;
  }
  outgoing.bin = EncodedBin{};
  ++outgoing.next;
  return true;
}

template <typename T>
std::vector<std::uint64_t> MessageBackend<T>::bins_sent() {
  const std::lock_guard<std::mutex> lock(send_mutex_);
  return sent_to_;
}

template <typename T>
bool MessageBackend<T>::settled(std::span<const std::uint64_t> expected) {
  {
    const std::lock_guard<std::mutex> lock(storage_mutex_);
    for (std::size_t source = 0; source < expected.size(); ++source) {
      if (applied_from_[source] < expected[source]) return false;
    }
  }
  const std::lock_guard<std::mutex> lock(send_mutex_);
  return sends_.empty();
}

template <typename T>
std::string MessageBackend<T>::waiting_for(std::span<const std::uint64_t> expected) {
  std::vector<int> senders;
  {
    const std::lock_guard<std::mutex> lock(storage_mutex_);
    for (std::size_t source = 0; source < expected.size(); ++source) {
      if (applied_from_[source] < expected[source]) senders.push_back(static_cast<int>(source));
    }
  }
  std::vector<int> receivers;
  {
    const std::lock_guard<std::mutex> lock(send_mutex_);
    receivers = sends_.targets();
  }
  std::string text;
  if (!senders.empty()) text = "bins from " + name_ranks(senders) + " have not all arrived";
  if (!receivers.empty()) {
    text += (text.empty() ? "" : ", and ") + std::string("bins to ") + name_ranks(receivers) +
            " are not received yet (a rank receives in update(), commit() and progress(), and on its progress "
            "thread)";
  }
  return text.empty() ? "the bins of the queued updates are not all sent yet" : text;
}

template <typename T>
void MessageBackend<T>::add_counters(MatrixStats& stats) const {
  {
    const std::lock_guard<std::mutex> lock(send_mutex_);
    stats.elements_sent += counters_.elements_sent;
    stats.elements_local += counters_.elements_local;
    stats.bytes_sent += counters_.bytes_sent;
    stats.binning_seconds += counters_.binning_seconds;
  }
  const std::lock_guard<std::mutex> lock(storage_mutex_);
  stats.bins_received +=
      std::accumulate(applied_from_.begin(), applied_from_.end(), std::uint64_t{0}) - applied_at_clear_;
}

template <typename T>
void MessageBackend<T>::clear_counters() {
  {
    const std::lock_guard<std::mutex> lock(send_mutex_);
    counters_ = MatrixStats{};
  }
  const std::lock_guard<std::mutex> lock(storage_mutex_);
  applied_at_clear_ = std::accumulate(applied_from_.begin(), applied_from_.end(), std::uint64_t{0});
}

// The other thread may be receiving: then this one leaves the message to it
// rather than wait. The lock is held until the bin is applied, so that the
// bins from one rank are added in the order it sent them. With count_from,
// rank by rank: a bin left for later must not hide the others' behind it
// (applied_from_ changes only under the receive lock held here). One probe
// of any rank first: a commit polling for owed bins asks each rank only
// once something has come (at 8 ranks, 1 probe instead of 7 per poll).
template <typename T>
bool MessageBackend<T>::receive_next(const std::function<std::uint64_t(int)>& count_from) {
  const std::unique_lock<std::mutex> lock(receive_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  int arrived = 0;
  MPI_Status status;
  check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, kBinTag, context_.comm, &arrived, &status), "MPI_Iprobe");
  if (!count_from || !arrived) {
    if (arrived) receive(status);
    return arrived != 0;
  }
  // Something came: from a rank that owes it, or a bin left for later.
  for (int source = 0; source < context_.size; ++source) {
    if (source == context_.rank) continue;
    check_mpi(MPI_Iprobe(source, kBinTag, context_.comm, &arrived, &status), "MPI_Iprobe");
    if (!arrived || applied_from_[static_cast<std::size_t>(source)] >= count_from(source)) continue;
    receive(status);
    return true;
  }
  return false;
}

template <typename T>
void MessageBackend<T>::receive(const MPI_Status& status) {
  int words = 0;
  check_mpi(MPI_Get_count(&status, MPI_UINT64_T, &words), "MPI_Get_count");
  const auto length = static_cast<std::size_t>(std::max(words, 0));
  if (received_.size() < length) received_.resize(length);
  check_mpi(
      MPI_Recv(received_.data(), words, MPI_UINT64_T, status.MPI_SOURCE, kBinTag, context_.comm, MPI_STATUS_IGNORE),
      "MPI_Recv");
  apply(std::span<const std::uint64_t>(received_).first(length), status.MPI_SOURCE);
}

template <typename T>
void MessageBackend<T>::apply(std::span<const std::uint64_t> message, int source) {
  const std::lock_guard<std::mutex> lock(storage_mutex_);
  apply_bin(message, context_.layout, context_.rank, storage_.data());
  if (source != context_.rank) ++applied_from_[static_cast<std::size_t>(source)];
}

template class MessageBackend<float>;
template class MessageBackend<double>;

}  // namespace resurgo
