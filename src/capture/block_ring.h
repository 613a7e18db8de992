// FIFO allocation of byte ranges in [0, capacity): blocks are handed out in
// order, one after the other around the ring, and their space comes back in
// the same order once released (a block released early waits for the older
// ones). The host staging buffer of the copy and delta captures and the staging buffer of
// device regions both keep versions this way: the oldest version is written
// first, so its space is the first to free.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace resurgo {

class BlockRing {
 public:
  explicit BlockRing(std::uint64_t capacity) : capacity_(capacity) {}

  std::uint64_t capacity() const { return capacity_; }
  bool empty() const;

  // The offset of a block of `bytes` (1..capacity), blocking while older
  // blocks still hold the space it needs. InvalidArgumentError otherwise.
  std::uint64_t allocate(std::uint64_t bytes);
  // Whether allocate(bytes) would return without waiting now.
  bool has_room(std::uint64_t bytes) const;
  // Where the next block begins if it fits there: right after the newest
  // block, or 0 when the ring is empty or the newest block ends it.
  std::uint64_t next_offset() const;
  // Releases the block at `offset` (any order; space comes back FIFO).
  void release(std::uint64_t offset);
  // Blocks until every block was released.
  void wait_empty();

 private:
  struct Block {
    std::uint64_t offset;
    std::uint64_t bytes;
    bool released;
  };
  bool find_space(std::uint64_t bytes, std::uint64_t& offset) const;  // caller holds mutex_

  const std::uint64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable space_freed_;
  std::deque<Block> blocks_;  // oldest first
};

}  // namespace resurgo
