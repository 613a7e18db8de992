#include "capture/block_ring.h"

#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

bool BlockRing::empty() const {
  std::lock_guard lock(mutex_);
  return blocks_.empty();
}

void BlockRing::wait_empty() {
  std::unique_lock lock(mutex_);
  space_freed_.wait(lock, [&] { return blocks_.empty(); });
}

bool BlockRing::find_space(std::uint64_t bytes, std::uint64_t& offset) const {
  if (blocks_.empty()) {
    offset = 0;
    return bytes <= capacity_;
  }
  const std::uint64_t tail = blocks_.front().offset;
  const std::uint64_t head = blocks_.back().offset + blocks_.back().bytes;
  const bool wrapped = blocks_.back().offset < tail;
  if (wrapped) {
    offset = head;
    return tail - head >= bytes;
  }
  if (capacity_ - head >= bytes) {
    offset = head;
    return true;
  }
  offset = 0;
  return tail >= bytes;
}

std::uint64_t BlockRing::allocate(std::uint64_t bytes) {
  if (bytes == 0 || bytes > capacity_) {
    throw InvalidArgumentError("a block of " + std::to_string(bytes) + " bytes does not fit a buffer of " +
                               std::to_string(capacity_) + " bytes (a block holds 1 byte at least)");
  }
  std::unique_lock lock(mutex_);
  std::uint64_t offset = 0;
  space_freed_.wait(lock, [&] { return find_space(bytes, offset); });
  blocks_.push_back({offset, bytes, false});
  return offset;
}

bool BlockRing::has_room(std::uint64_t bytes) const {
  std::lock_guard lock(mutex_);
  std::uint64_t offset = 0;
  return find_space(bytes, offset);
}

std::uint64_t BlockRing::next_offset() const {
  std::lock_guard lock(mutex_);
  if (blocks_.empty()) return 0;
  const std::uint64_t head = blocks_.back().offset + blocks_.back().bytes;
  return head == capacity_ ? 0 : head;
}

void BlockRing::release(std::uint64_t offset) {
  {
    std::lock_guard lock(mutex_);
    for (Block& block : blocks_) {
      if (block.offset == offset && !block.released) {
        block.released = true;
        break;
      }
    }
    while (!blocks_.empty() && blocks_.front().released) blocks_.pop_front();
  }
  space_freed_.notify_all();
}

}  // namespace resurgo
