// L1: the bounded host staging buffer. Versions are captured into blocks
// allocated in FIFO order from one anonymous mapping (a BlockRing), and
// released in the same order once written to L2. Its pages are faulted in
// piece by piece (kPiece bytes), as the gpu-cache-allocation paper touches
// its host buffer: a background thread touches the pieces just ahead of the
// next block to be allocated, and a capture faults in the pieces of its
// block that are still untouched itself, each just before it copies into
// it, so that no one waits for the whole buffer. Each piece is faulted in
// once: whoever claims it first.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "capture/block_ring.h"

namespace resurgo {

class HostBuffer {
 public:
  // Bytes of a piece: the buffer's pages are faulted in this many at once,
  // and the background touch stops or pauses between two pieces.
  static constexpr std::uint64_t kPiece = std::uint64_t{4} << 20;

  explicit HostBuffer(std::uint64_t capacity);
  ~HostBuffer();  // the owner releases every block first
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::uint64_t capacity() const { return capacity_; }
  bool empty() const { return ring_.empty(); }
  std::uint64_t offset_of(const std::byte* at) const { return static_cast<std::uint64_t>(at - base_); }

  // A block of `bytes` (1..capacity), blocking while older blocks still
  // occupy the space it needs.
  std::byte* allocate(std::uint64_t bytes);
  // Whether allocate(bytes) would return without waiting now.
  bool has_room(std::uint64_t bytes) const { return ring_.has_room(bytes); }
  // Releases a block returned by allocate (any order; space is reclaimed FIFO).
  void release(const std::byte* block);
  // Blocks until every block was released.
  void wait_empty() { ring_.wait_empty(); }

  // Starts touching the pieces in the background, those within `ahead`
  // bytes of the next allocation (prefault_next), and again after each
  // capture as the ring moves on, until every piece is touched. A buffer
  // much larger than a version (the floor for small states) is touched a
  // few versions ahead, not whole at open: the whole would cost every
  // store that CPU time and memory before its first checkpoint.
  void start_prefault(std::uint64_t ahead = kWholeBuffer);
  static constexpr std::uint64_t kWholeBuffer = ~std::uint64_t{0};
  // Why the background touch pauses: it runs only while no reason holds.
  // A capture and a restart want the memory bandwidth for themselves.
  enum class Pause : std::uint8_t { kCapture = 1, kRestart = 2 };
  // Pauses (true) or resumes (false) the background touch for `why`.
  void pause_prefault(Pause why, bool paused);
  // Touches the first untouched piece at or after the next block to be
  // allocated (around the ring, within `ahead` bytes of it); its offset, or
  // nothing when every such piece is touched or being touched.
  std::optional<std::uint64_t> prefault_next();

  // Faults in the piece holding `at` unless someone already did or is
  // doing it; the seconds it took (0 when it did nothing).
  double touch(const std::byte* at);
  // Whether the piece holding buffer offset `offset` is faulted in.
  bool touched(std::uint64_t offset) const;

 private:
  enum PieceState : std::uint8_t { kUntouched, kTouching, kTouched };
  bool touch_piece(std::uint64_t piece);  // false: someone else claimed it
  void prefault();
  bool prefault_due() const;  // not paused, and a piece ahead untouched (mutex_ held)
  std::uint64_t pieces_ahead() const;  // from the next block's piece on, within ahead_
  bool untouched_ahead() const;
  bool all_touched() const;

  std::uint64_t capacity_;
  std::byte* base_ = nullptr;
  BlockRing ring_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> pieces_;  // PieceState of each piece
  std::uint64_t piece_count_;
  std::atomic<std::uint64_t> ahead_{kWholeBuffer};
  std::mutex mutex_;  // the prefault's pauses and stop
  std::condition_variable prefault_resumed_;
  std::uint8_t prefault_pauses_ = 0;  // Pause bits
  bool stop_prefault_ = false;
  std::thread prefaulter_;
};

}  // namespace resurgo
