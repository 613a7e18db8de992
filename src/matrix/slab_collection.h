// The write side of a global-layout file's slab exchange (file_slabs.h,
// matrix_io.cpp), a chunk at a time, the mirror of slab_delivery.h: each
// owner sends its elements of every chunk of every slab as one message per
// (slab, chunk), all posted at once from its elements in file order; each
// slab's holder receives a chunk's messages into one of two buffers of one
// chunk while it writes the chunk before, and brings them into file order
// as the chunk is written. Receiving the whole slab before writing needed a
// buffer the size of the slab, whose pages the kernel zeroes at their first
// touch on every write, and left the writes for after the exchange
// (bench/results/matrix_io.md). An owner learns how its elements fall into
// each holder's chunks from the holder, which counts them once per slab.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "matrix/file_slabs.h"
#include "matrix/mpi_call.h"
#include "matrix/polite_wait.h"
#include "matrix/scratch_buffer.h"
#include "matrix/update_backend.h"

namespace resurgo {

template <typename T>
class SlabCollection {
 public:
  // `file_order`: this rank's elements in file order, those of rank 0's
  // slab first, then rank 1's, and so on (slabs follow each other in the
  // file).
  SlabCollection(const MatrixContext& context, const FileSlabs& slabs, const T* file_order,
                 std::uint64_t chunk_elements)
      : context_(context),
        slabs_(slabs),
        chunk_(chunk_elements),
        chunks_(chunks_of(context.rank)),
        ranks_(static_cast<std::size_t>(context.size)),
        counts_(chunks_ * ranks_, 0),
        file_order_(file_order),
        areas_{Area{ScratchBuffer<T>(std::min(chunk_, slabs.elements(context.rank)))},
               Area{ScratchBuffer<T>(std::min(chunk_, slabs.elements(context.rank)))}} {}

  // Collective: the holders tell the owners their counts, the owners post
  // every send, the holders the receives of their first two chunks. Once
  // started, every rank collects all its chunks and finishes, whatever
  // failed meanwhile: no message may be left for a later exchange to meet.
  void start() {
    count_owners();
    send_all(owners_counts());
    for (std::uint64_t k = 0; k < std::min<std::uint64_t>(2, chunks_); ++k) receive(k);
  }

  // Slab offsets [at, at + n) (the chunk at `at`), in file order, into `out`.
  void collect(std::uint64_t at, std::uint64_t n, T* out) {
    const std::uint64_t k = at / chunk_;
    Area& area = areas_[k % 2];
    wait_all_politely(area.requests);
    std::vector<std::uint64_t> next = offsets(k);
    const auto self = static_cast<std::size_t>(context_.rank);
    std::copy_n(file_order_ + self_next_, counts_[k * ranks_ + self], area.elements.data() + next[self]);
    self_next_ += counts_[k * ranks_ + self];
    slabs_.unpack(context_.rank, at, at + n, area.elements.data(), next, out);
    if (k + 2 < chunks_) receive(k + 2);
  }

  // Until every element of this rank reached its slab's holder.
  void finish() { wait_all_politely(sends_); }

 private:
  struct Area {
    ScratchBuffer<T> elements;
    std::vector<MPI_Request> requests{};
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
  // itself, whose elements collect() copies from where they start.
  void send_all(const std::vector<std::uint64_t>& theirs) {
    std::size_t at = 0;
    std::uint64_t next = 0;
    for (int holder = 0; holder < context_.size; ++holder) {
      if (holder == context_.rank) self_next_ = next;
      for (std::uint64_t k = 0; k < chunks_of(holder); ++k, ++at) {
        const std::uint64_t count = theirs[at];
        if (holder != context_.rank && count > 0) {
          check_mpi(MPI_Isend(file_order_ + next, static_cast<int>(count), mpi_type<T>(), holder, kSlabTag,
                              context_.comm, &sends_.emplace_back()),
                    "MPI_Isend");
        }
        next += count;
      }
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
  const T* file_order_;
  Area areas_[2];
  std::vector<MPI_Request> sends_;
};

}  // namespace resurgo
