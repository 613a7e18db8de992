// The write side of a global-layout file's slab exchange (file_slabs.h,
// matrix_io.cpp), a chunk at a time, the mirror of slab_delivery.h: each
// owner sends its elements of every chunk of every slab as one message per
// (slab, chunk); each slab's holder receives a chunk's messages into one of
// two buffers of one chunk while it writes the chunk before, and brings
// them into file order as the chunk is written. Receiving the whole slab
// before writing needed a buffer the size of the slab, whose pages the
// kernel zeroes at their first touch on every write, and left the writes
// for after the exchange (bench/results/matrix_io.md). An owner learns how
// its elements fall into each holder's chunks from the holder, which
// counts them once per slab.
//
// A column-major file's owner sends straight from its local array, all
// messages posted at once. A row-major file's owner transposes each
// message's rows into a ring of a few chunks as the ring frees, in chunk
// order across the holders: a row-major copy of the whole local array
// first cost a buffer the size of the part, zeroed by the kernel on every
// write. Chunk order keeps the ring from deadlocking: every holder
// receives its chunks in order, and every rank moves its sends on while it
// waits for its own chunks.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "matrix/file_slabs.h"
#include "matrix/mpi_call.h"
#include "matrix/polite_wait.h"
#include "matrix/scratch_buffer.h"
#include "matrix/update_backend.h"

namespace resurgo {

// Where this rank's elements come from, by their offset in its file order:
// memory at `in_place` + offset (a column-major file: the local array is in
// file order), else take(offset, count, out) (a row-major file: the local
// array's rows, transposed).
template <typename T>
struct FileOrderSource {
  const T* in_place = nullptr;
  std::function<void(std::uint64_t offset, std::uint64_t count, T* out)> take{};
};

template <typename T>
class SlabCollection {
 public:
  SlabCollection(const MatrixContext& context, const FileSlabs& slabs, FileOrderSource<T> source,
                 std::uint64_t chunk_elements)
      : context_(context),
        slabs_(slabs),
        chunk_(chunk_elements),
        chunks_(chunks_of(context.rank)),
        ranks_(static_cast<std::size_t>(context.size)),
        counts_(chunks_ * ranks_, 0),
        source_(std::move(source)),
        areas_{Area{ScratchBuffer<T>(std::min(chunk_, slabs.elements(context.rank)))},
               Area{ScratchBuffer<T>(std::min(chunk_, slabs.elements(context.rank)))}} {}

  // Collective: the holders tell the owners their counts, the owners post
  // their first sends, the holders the receives of their first two chunks.
  // Once started, every rank collects all its chunks and finishes, whatever
  // failed meanwhile: no message may be left for a later exchange to meet.
  void start() {
    count_owners();
    plan_sends(owners_counts());
    pump();
    for (std::uint64_t k = 0; k < std::min<std::uint64_t>(2, chunks_); ++k) receive(k);
  }

  // Slab offsets [at, at + n) (the chunk at `at`), in file order, into `out`.
  void collect(std::uint64_t at, std::uint64_t n, T* out) {
    const std::uint64_t k = at / chunk_;
    Area& area = areas_[k % 2];
    pump();
    wait_all_politely(area.requests, [this] { return pump(); });
    std::vector<std::uint64_t> next = offsets(k);
    const auto self = static_cast<std::size_t>(context_.rank);
    const std::uint64_t own = counts_[k * ranks_ + self];
    take(self_next_, own, area.elements.data() + next[self]);
    self_next_ += own;
    slabs_.unpack(context_.rank, at, at + n, area.elements.data(), next, out);
    if (k + 2 < chunks_) receive(k + 2);
  }

  // Until every element of this rank reached its slab's holder.
  void finish() {
    wait_until([this] { return next_message_ == outbox_.size() && in_flight_.empty(); }, [this] { return pump(); });
  }

 private:
  // The ring of a row-major file's owner holds this many chunks (or the
  // owner's elements, if fewer): 8 MiB of 2 MiB chunks, a pass over which the kernel zeroes
  // on every write instead of one over the whole part.
  static constexpr std::uint64_t kRingChunks = 4;

  struct Area {
    ScratchBuffer<T> elements;
    std::vector<MPI_Request> requests{};
  };
  // This rank's `count` elements from `offset` of its file order on, for
  // chunk `chunk` of `holder`'s slab.
  struct Message {
    int holder;
    std::uint64_t chunk;
    std::uint64_t offset;
    std::uint64_t count;
  };
  // A send posted, and its stretch [begin, end) of the ring.
  struct InFlight {
    MPI_Request request;
    std::uint64_t begin;
    std::uint64_t end;
  };

  std::uint64_t chunks_of(int rank) const { return (slabs_.elements(rank) + chunk_ - 1) / chunk_; }
  // counts_[k * ranks + o]: owner o's elements in chunk k of this rank's slab.
  void count_owners() {
    const std::uint64_t total = slabs_.elements(context_.rank);
    for (std::uint64_t k = 0; k < chunks_; ++k) {
      std::uint64_t* row = &counts_[k * ranks_];
      slabs_.for_each_run(context_.rank, k * chunk_, std::min(total, (k + 1) * chunk_),
                          [row](std::uint64_t, int owner, std::uint64_t length) { row[owner] += length; });
    }
  }

  // Where each owner's elements of chunk k start in its area.
  std::vector<std::uint64_t> offsets(std::uint64_t k) const {
    std::vector<std::uint64_t> at(ranks_, 0);
    for (std::size_t o = 1; o < ranks_; ++o) at[o] = at[o - 1] + counts_[k * ranks_ + o - 1];
    return at;
  }

  // What every holder counted for this rank: holder r's chunk counts of
  // this rank's elements, one after the other in rank order.
  std::vector<std::uint64_t> owners_counts() const {
    std::vector<std::uint64_t> mine(chunks_ * ranks_);
    std::vector<int> send_counts(ranks_), send_starts(ranks_), receive_counts(ranks_), receive_starts(ranks_);
    std::uint64_t received = 0;
    for (std::size_t o = 0; o < ranks_; ++o) {
      for (std::uint64_t k = 0; k < chunks_; ++k) mine[o * chunks_ + k] = counts_[k * ranks_ + o];
      send_counts[o] = static_cast<int>(chunks_);
      send_starts[o] = static_cast<int>(o * chunks_);
      receive_counts[o] = static_cast<int>(chunks_of(static_cast<int>(o)));
      receive_starts[o] = static_cast<int>(received);
      received += chunks_of(static_cast<int>(o));
    }
    std::vector<std::uint64_t> theirs(received);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ialltoallv(mine.data(), send_counts.data(), send_starts.data(), MPI_UINT64_T, theirs.data(),
                             receive_counts.data(), receive_starts.data(), MPI_UINT64_T, context_.comm, &request),
              "MPI_Ialltoallv");
    wait_politely(request);
    return theirs;
  }

  // One message per (holder, chunk) of this rank's elements in it, but to
  // itself, whose elements collect() takes from where they start; in chunk
  // order, then holder order.
  void plan_sends(const std::vector<std::uint64_t>& theirs) {
    std::size_t at = 0;
    std::uint64_t next = 0;
    for (int holder = 0; holder < context_.size; ++holder) {
      if (holder == context_.rank) self_next_ = next;
      for (std::uint64_t k = 0; k < chunks_of(holder); ++k, ++at) {
        const std::uint64_t count = theirs[at];
        if (holder != context_.rank && count > 0) outbox_.push_back(Message{holder, k, next, count});
        next += count;
      }
    }
    std::stable_sort(outbox_.begin(), outbox_.end(),
                     [](const Message& a, const Message& b) { return a.chunk < b.chunk; });
    if (source_.in_place == nullptr) ring_ = ScratchBuffer<T>(std::min(kRingChunks * chunk_, next));
  }

  // Retires the sends done, then posts those next in line while their
  // elements find room; true when it did either.
  bool pump() {
    const bool retired = retire();
    return post() || retired;
  }

  // The sends done, oldest first: the ring frees in the order it filled.
  bool retire() {
    bool retired = false;
    while (!in_flight_.empty()) {
      int done = 0;
      check_mpi(MPI_Test(&in_flight_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done == 0) break;
      in_flight_.pop_front();
      retired = true;
    }
    return retired;
  }

  bool post() {
    const std::size_t first = next_message_;
    for (; next_message_ < outbox_.size(); ++next_message_) {
      const Message& message = outbox_[next_message_];
      const std::optional<std::uint64_t> begin = room(message.count);
      if (!begin) break;
      InFlight& sent = in_flight_.emplace_back(InFlight{MPI_REQUEST_NULL, *begin, *begin + message.count});
      check_mpi(MPI_Isend(stage(message, *begin), static_cast<int>(message.count), mpi_type<T>(), message.holder,
                          kSlabTag, context_.comm, &sent.request),
                "MPI_Isend");
    }
    return next_message_ > first;
  }

  // Where a message's elements are sent from: the local array itself, or
  // the ring from `begin` on, where they are taken first.
  const T* stage(const Message& message, std::uint64_t begin) {
    if (source_.in_place != nullptr) return source_.in_place + message.offset;
    source_.take(message.offset, message.count, ring_.data() + begin);
    return ring_.data() + begin;
  }

  // Where `n` elements fit in the ring after the sends in flight, if they
  // do (0 for every send from the local array itself). The ring's free
  // space never closes up entirely, so that a full ring and an empty one
  // look different.
  std::optional<std::uint64_t> room(std::uint64_t n) const {
    if (source_.in_place != nullptr) return 0;  // sends from the local array take no room
    if (in_flight_.empty()) return 0;           // n is at most the ring: a chunk, or all the elements
    const std::uint64_t oldest = in_flight_.front().begin;
    const std::uint64_t newest_end = in_flight_.back().end;
    if (newest_end < oldest) return newest_end + n < oldest ? std::optional<std::uint64_t>(newest_end) : std::nullopt;
    if (newest_end + n <= ring_.size()) return newest_end;
    return n < oldest ? std::optional<std::uint64_t>(0) : std::nullopt;
  }

  // This rank's elements [offset, offset + count) of its file order, to `out`.
  void take(std::uint64_t offset, std::uint64_t count, T* out) const {
    if (source_.in_place != nullptr) {
      std::copy_n(source_.in_place + offset, count, out);
    } else {
      source_.take(offset, count, out);
    }
  }

  // Posts the receives of chunk k into its area.
  void receive(std::uint64_t k) {
    Area& area = areas_[k % 2];
    const std::vector<std::uint64_t> at = offsets(k);
    for (std::size_t owner = 0; owner < ranks_; ++owner) {
      const std::uint64_t count = counts_[k * ranks_ + owner];
      if (static_cast<int>(owner) == context_.rank || count == 0) continue;
      check_mpi(MPI_Irecv(area.elements.data() + at[owner], static_cast<int>(count), mpi_type<T>(),
                          static_cast<int>(owner), kSlabTag, context_.comm, &area.requests.emplace_back()),
                "MPI_Irecv");
    }
  }

  const MatrixContext& context_;
  const FileSlabs& slabs_;
  std::uint64_t chunk_;
  std::uint64_t chunks_;
  std::size_t ranks_;
  std::vector<std::uint64_t> counts_;
  std::uint64_t self_next_ = 0;
  FileOrderSource<T> source_;
  Area areas_[2];
  std::vector<Message> outbox_;
  std::size_t next_message_ = 0;
  ScratchBuffer<T> ring_;
  std::deque<InFlight> in_flight_;
};

}  // namespace resurgo
