// L1: the bounded host staging buffer. Versions are captured into blocks
// allocated in FIFO order from one anonymous mapping (a ring), and released
// in the same order once written to L2. The pages are pre-faulted in the
// background with MADV_POPULATE_WRITE, so that the application's copy runs
// at memcpy speed instead of first-touch speed (the idea of the
// gpu-cache-allocation paper, applied to the host buffer). Pages below
// `touched_` are known to be faulted in; a capture that lands above it
// faults its block in first (timed apart, as first-touch time).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <atomic>
#include <utility>

namespace resurgo {

class HostBuffer {
 public:
  explicit HostBuffer(std::uint64_t capacity);
  ~HostBuffer();  // the owner releases every block first
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::uint64_t capacity() const { return capacity_; }
  bool empty() const;

  // A block of `bytes` (1..capacity), blocking while older blocks still
  // occupy the space it needs.
  std::byte* allocate(std::uint64_t bytes);
  // Releases a block returned by allocate (any order; space is reclaimed FIFO).
  void release(const std::byte* block);
  // Blocks until every block was released.
  void wait_empty();

  // The part of [block, block + bytes) (and below it) that no one has
  // faulted in yet, as [begin, end) offsets into the block; empty when none.
  std::pair<std::uint64_t, std::uint64_t> untouched(const std::byte* block, std::uint64_t bytes) const;
  // Records that everything below block + bytes is faulted in.
  void mark_touched(const std::byte* block, std::uint64_t bytes);
  // Pauses (true) or resumes (false) the background prefault, e.g. while a
  // restart needs the memory bandwidth.
  void pause_prefault(bool paused);

 private:
  struct Block {
    std::uint64_t offset;
    std::uint64_t bytes;
    bool released;
  };
  bool find_space(std::uint64_t bytes, std::uint64_t& offset) const;
  void prefault();

  std::uint64_t capacity_;
  std::byte* base_ = nullptr;
  mutable std::mutex mutex_;
  std::condition_variable space_freed_;
  std::deque<Block> blocks_;  // oldest first
  std::atomic<std::uint64_t> touched_{0};
  std::condition_variable prefault_resumed_;
  bool prefault_paused_ = false;
  std::atomic<bool> stop_prefault_{false};
  std::thread prefaulter_;
};

}  // namespace resurgo
