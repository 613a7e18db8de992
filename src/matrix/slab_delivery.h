// The read side of a global-layout file's slab exchange (file_slabs.h,
// matrix_io.cpp), a chunk at a time: the elements of each chunk read from
// this rank's slab leave for their owners as soon as the chunk is summed,
// through two send buffers of one chunk each, while this rank takes what
// the other holders send it into its own elements (the local array, or its
// rows transposed for a row-major file). Sending
// the whole slab after reading it needed a buffer the size of the slab,
// whose pages the kernel zeroes at their first touch on every read, and
// left the exchange for after the reads (bench/results/matrix_io.md).
// A holder's messages to one owner arrive in the order sent (one tag), so
// each lands after the previous one from the same holder.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "matrix/file_slabs.h"
#include "matrix/mpi_call.h"
#include "matrix/polite_wait.h"
#include "matrix/scratch_buffer.h"
#include "matrix/update_backend.h"
#include "resurgo/errors.hpp"

namespace resurgo {

// Where this rank's elements go, by their offset in its file order: into
// memory at `in_place` + offset (a column-major file: the local array is in
// file order), else through put(offset, elements, count) (a row-major file:
// into the local array's rows, transposed).
template <typename T>
struct FileOrderSink {
  T* in_place = nullptr;
  std::function<void(std::uint64_t offset, const T* elements, std::uint64_t count)> put{};
};

template <typename T>
class SlabDelivery {
 public:
  // This rank's elements [starts[r], starts[r] + counts[r]) of its file
  // order are in rank r's slab; they go to `sink`.
  SlabDelivery(const MatrixContext& context, const FileSlabs& slabs, std::vector<std::uint64_t> starts,
               std::vector<std::uint64_t> counts, FileOrderSink<T> sink, std::uint64_t chunk_elements)
      : context_(context),
        slabs_(slabs),
        starts_(std::move(starts)),
        counts_(std::move(counts)),
        arrived_(counts_.size(), 0),
        sink_(std::move(sink)),
        outgoing_{Outgoing{ScratchBuffer<T>(chunk_elements)}, Outgoing{ScratchBuffer<T>(chunk_elements)}},
        arriving_(sink_.in_place == nullptr ? chunk_elements : 0),
        owner_counts_(counts_.size()),
        owner_offsets_(counts_.size()) {}

  // The slab's elements [at, at + n) (n at most the chunk), in `chunk`.
  void deliver(std::uint64_t at, std::uint64_t n, const T* chunk) {
    Outgoing& out = outgoing_[turn_];
    turn_ = 1 - turn_;
    wait_all_politely(out.requests, [this] { return take_arrivals(); });  // owners may wait on this rank
    cut_by_owner(at, n);
    slabs_.pack(context_.rank, at, at + n, chunk, owner_offsets_, out.buffer.data());  // advances each offset past its run
    for (int owner = 0; owner < context_.size; ++owner) {
      const std::uint64_t count = owner_counts_[owner];
      if (count == 0) continue;
      const T* run = out.buffer.data() + owner_offsets_[owner] - count;
      if (owner == context_.rank) {
        take(owner, run, count);
        continue;
      }
      check_mpi(MPI_Isend(run, static_cast<int>(count), mpi_type<T>(), owner, kSlabTag, context_.comm,
                          &out.requests.emplace_back()),
                "MPI_Isend");
    }
    take_arrivals();
  }

  // Until every send left and every element of this rank arrived.
  void finish() {
    for (Outgoing& out : outgoing_) wait_all_politely(out.requests, [this] { return take_arrivals(); });
    wait_until([&] { return arrived_ == counts_; }, [&] { return take_arrivals(); });
  }

 private:
  struct Outgoing {
    ScratchBuffer<T> buffer;
    std::vector<MPI_Request> requests{};
  };

  // Each owner's elements of slab offsets [at, at + n): owner_counts_, and
  // where each owner's run starts in the send buffer (owner_offsets_).
  void cut_by_owner(std::uint64_t at, std::uint64_t n) {
    std::fill(owner_counts_.begin(), owner_counts_.end(), 0);
    slabs_.for_each_run(context_.rank, at, at + n,
                        [&](std::uint64_t, int owner, std::uint64_t length) { owner_counts_[owner] += length; });
    std::uint64_t offset = 0;
    for (std::size_t owner = 0; owner < owner_counts_.size(); ++owner) {
      owner_offsets_[owner] = offset;
      offset += owner_counts_[owner];
    }
  }

  // The next `count` of this rank's elements held by `holder`'s slab.
  void take(int holder, const T* elements, std::uint64_t count) {
    const std::uint64_t offset = starts_[holder] + arrived_[holder];
    if (sink_.in_place != nullptr) {
      std::copy_n(elements, count, sink_.in_place + offset);
    } else {
      sink_.put(offset, elements, count);
    }
    arrived_[holder] += count;
  }

  // Receives every message already there; true when one came.
  bool take_arrivals() {
    bool took = false;
    for (;;) {
      int found = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kSlabTag, context_.comm, &found, &message, &status), "MPI_Improbe");
      if (found == 0) return took;
      int count = 0;
      check_mpi(MPI_Get_count(&status, mpi_type<T>(), &count), "MPI_Get_count");
      const int holder = status.MPI_SOURCE;
      const bool in_place = sink_.in_place != nullptr;  // else through a buffer of one chunk, which holds any message
      const auto room = in_place ? counts_[holder] - arrived_[holder]
                                 : std::min<std::uint64_t>(counts_[holder] - arrived_[holder], arriving_.size());
      if (count < 0 || static_cast<std::uint64_t>(count) > room) {
        throw StateError("ConvergentMatrix::read_global: rank " + std::to_string(holder) + " sent " +
                         std::to_string(count) + " elements where at most " + std::to_string(room) +
                         " could come: the ranks disagree on the file's layout (a bug; please report it)");
      }
      T* into = in_place ? sink_.in_place + starts_[holder] + arrived_[holder] : arriving_.data();
      check_mpi(MPI_Mrecv(into, count, mpi_type<T>(), &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
      if (in_place) {
        arrived_[holder] += static_cast<std::uint64_t>(count);
      } else {
        take(holder, into, static_cast<std::uint64_t>(count));
      }
      took = true;
    }
  }

  const MatrixContext& context_;
  const FileSlabs& slabs_;
  std::vector<std::uint64_t> starts_;
  std::vector<std::uint64_t> counts_;
  std::vector<std::uint64_t> arrived_;
  FileOrderSink<T> sink_;
  Outgoing outgoing_[2];
  int turn_ = 0;
  ScratchBuffer<T> arriving_;
  std::vector<std::uint64_t> owner_counts_;
  std::vector<std::uint64_t> owner_offsets_;
};

}  // namespace resurgo
