// The fake CUDA driver's memory and streams (fake_cuda_driver.cpp says what
// is emulated): host memory standing for an allocation, the pieces of memory
// an operation reads or writes, and streams whose worker threads run the
// operations in order, late.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace fake_cuda {

using Clock = std::chrono::steady_clock;

// Host memory standing for one allocation, mapped read-write for the fake's
// own copies. Device memory is a memfd, so that its device address can be a
// second mapping of it that the host cannot touch (as on a GPU); managed and
// pinned host memory is anonymous, the application's address itself.
class Backing {
 public:
  // Null when the host has not the memory (the caller reports out of memory).
  static std::shared_ptr<Backing> memfd(std::size_t bytes);
  static std::shared_ptr<Backing> anonymous(std::size_t bytes);
  ~Backing();
  Backing(const Backing&) = delete;
  Backing& operator=(const Backing&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  int fd() const { return fd_; }  // -1 when anonymous

 private:
  Backing(std::byte* data, std::size_t size, int fd) : data_(data), size_(size), fd_(fd) {}
  std::byte* data_;
  std::size_t size_;
  int fd_;
};

// Memory at an address the application may use: an allocation, or a
// cuMemMap of physical memory into a reservation. A stream operation holds
// the mappings it uses; one freed or unmapped before the operation ran makes
// it fail with CUDA_ERROR_ILLEGAL_ADDRESS, as the GPU's access would fault.
struct Mapping {
  explicit Mapping(std::shared_ptr<Backing> memory) : backing(std::move(memory)) {}
  const std::shared_ptr<Backing> backing;
  // Relaxed: it detects misuse, it must not order the application's threads.
  std::atomic<bool> live{true};
};

// Part of a copy's source or target: `bytes` at `data` in the fake's view,
// kept valid by `mapping` (none for pageable host memory, which the
// application owns).
struct Piece {
  std::byte* data;
  std::size_t bytes;
  std::shared_ptr<const Mapping> mapping;
};

// Runs the copy (or fill when `source` is empty: every byte `fill`) unless a
// mapping died meanwhile.
CUresult run_copy(const std::vector<Piece>& target, const std::vector<Piece>& source, unsigned char fill = 0);

// Operations that failed on a stream since the last reset.
extern std::atomic<std::uint64_t> async_failures;
// While set, no stream starts an operation (fake_cuda_hold_streams).
extern std::atomic<bool> streams_held;

// A stream: a worker thread runs the operations in the order they were
// enqueued, each no earlier than its due time. The worker never takes the
// driver's mutex, so only synchronisation orders the application's threads
// after a copy (and ThreadSanitizer sees a missing one).
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  using Operation = std::function<CUresult()>;
  static std::shared_ptr<Stream> start();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(Operation operation, Clock::time_point due);
  // Waits for every operation enqueued so far; the first error an
  // operation had on this stream, which stays (an illegal address is sticky).
  CUresult synchronize();
  // The worker runs what is queued, then ends; the stream then goes (as
  // cuStreamDestroy does not wait for the work).
  void retire();

 private:
  Stream() = default;
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  struct Queued {
    Operation operation;
    Clock::time_point due;
  };
  std::deque<Queued> queue_;
  std::uint64_t enqueued_ = 0;
  std::uint64_t completed_ = 0;
  CUresult error_ = CUDA_SUCCESS;
  bool retired_ = false;
  std::thread worker_;
};

// An event: each cuEventRecord enqueues a marker; the event is complete
// once the stream reached the latest one, with the time it did.
class Event {
 public:
  explicit Event(bool timing) : timing_(timing) {}
  // At cuEventRecord; the ticket goes to reached() on the stream.
  std::uint64_t record();
  void reached(std::uint64_t ticket);
  void synchronize();
  // CUDA_ERROR_INVALID_HANDLE without timing or before the first record,
  // CUDA_ERROR_NOT_READY while the latest record was not reached.
  CUresult time(Clock::time_point& when) const;

 private:
  const bool timing_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t recorded_ = 0;
  std::uint64_t reached_ = 0;
  Clock::time_point when_;
};

}  // namespace fake_cuda
