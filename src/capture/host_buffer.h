// L1: the bounded host staging buffer. Versions are captured into blocks
// allocated in FIFO order from one anonymous mapping (a BlockRing), and
// released in the same order once written to L2. The pages are pre-faulted in the
// background with MADV_POPULATE_WRITE, so that the application's copy runs
// at memcpy speed instead of first-touch speed (the idea of the
// gpu-cache-allocation paper, applied to the host buffer). Pages below
// `touched_` are known to be faulted in; a capture that lands above it
// faults its block in first (timed apart, as first-touch time).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>

#include "capture/block_ring.h"

namespace resurgo {

class HostBuffer {
 public:
  explicit HostBuffer(std::uint64_t capacity);
  ~HostBuffer();  // the owner releases every block first
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::uint64_t capacity() const { return capacity_; }
  bool empty() const { return ring_.empty(); }

  // A block of `bytes` (1..capacity), blocking while older blocks still
  // occupy the space it needs.
  std::byte* allocate(std::uint64_t bytes);
  // Whether allocate(bytes) would return without waiting now.
  bool has_room(std::uint64_t bytes) const { return ring_.has_room(bytes); }
  // Releases a block returned by allocate (any order; space is reclaimed FIFO).
  void release(const std::byte* block);
  // Blocks until every block was released.
  void wait_empty() { ring_.wait_empty(); }

  // The part of [block, block + bytes) (and below it) that no one has
  // faulted in yet, as [begin, end) offsets into the block; empty when none.
  std::pair<std::uint64_t, std::uint64_t> untouched(const std::byte* block, std::uint64_t bytes) const;
  // Records that everything below block + bytes is faulted in.
  void mark_touched(const std::byte* block, std::uint64_t bytes);
  // Pauses (true) or resumes (false) the background prefault, e.g. while a
  // restart needs the memory bandwidth.
  void pause_prefault(bool paused);

 private:
  void prefault();

  std::uint64_t capacity_;
  std::byte* base_ = nullptr;
  BlockRing ring_;
  mutable std::mutex mutex_;  // the prefault's pause
  std::atomic<std::uint64_t> touched_{0};
  std::condition_variable prefault_resumed_;
  bool prefault_paused_ = false;
  std::atomic<bool> stop_prefault_{false};
  std::thread prefaulter_;
};

}  // namespace resurgo
