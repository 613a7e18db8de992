#include "capture/host_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {
constexpr std::uint64_t kPrefaultStep = 64u << 20;  // lets the destructor stop it early
}

HostBuffer::HostBuffer(std::uint64_t capacity) : capacity_(capacity), ring_(capacity) {
  void* memory = ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw StorageError("cannot reserve a host buffer of " + std::to_string(capacity_) +
                       " bytes: " + std::strerror(errno) + "; lower buffer.capacity");
  }
  base_ = static_cast<std::byte*>(memory);
  ::madvise(base_, capacity_, MADV_HUGEPAGE);  // fewer faults and TLB misses; optional
  prefaulter_ = std::thread([this] { prefault(); });
}

HostBuffer::~HostBuffer() {
  {
    std::lock_guard lock(mutex_);
    stop_prefault_ = true;
  }
  prefault_resumed_.notify_all();
  prefaulter_.join();
  ::munmap(base_, capacity_);
}

// MADV_POPULATE_WRITE faults pages in without changing their contents, so it
// may run while the application already copies into the same pages. It runs
// at normal priority: at SCHED_IDLE (as before) it never ran on a machine
// whose cores were busy with the application and the pipeline, and the first
// checkpoints paid the first touch (27-542 ms instead of 22 ms at 256 MiB).
// It pauses while a restart runs, which it used to slow down up to 7x.
void HostBuffer::prefault() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      prefault_resumed_.wait(lock, [&] { return !prefault_paused_ || stop_prefault_; });
    }
    const std::uint64_t offset = touched_.load();
    if (stop_prefault_ || offset >= capacity_) return;
    const std::uint64_t bytes = std::min(kPrefaultStep, capacity_ - offset);
    if (::madvise(base_ + offset, bytes, MADV_POPULATE_WRITE) != 0) return;  // old kernel: fault on use
    std::uint64_t expected = offset;
    touched_.compare_exchange_strong(expected, offset + bytes);  // a capture may have gone further
  }
}

void HostBuffer::pause_prefault(bool paused) {
  {
    std::lock_guard lock(mutex_);
    prefault_paused_ = paused;
  }
  prefault_resumed_.notify_all();
}

std::pair<std::uint64_t, std::uint64_t> HostBuffer::untouched(const std::byte* block, std::uint64_t bytes) const {
  const auto begin = static_cast<std::uint64_t>(block - base_);
  const std::uint64_t touched = touched_.load();
  if (touched >= begin + bytes) return {0, 0};
  return {touched > begin ? touched - begin : 0, bytes};
}

void HostBuffer::mark_touched(const std::byte* block, std::uint64_t bytes) {
  const std::uint64_t end = static_cast<std::uint64_t>(block - base_) + bytes;
  std::uint64_t touched = touched_.load();
  while (touched < end && !touched_.compare_exchange_weak(touched, end)) {
  }
}

std::byte* HostBuffer::allocate(std::uint64_t bytes) { return base_ + ring_.allocate(bytes); }

void HostBuffer::release(const std::byte* block) { ring_.release(static_cast<std::uint64_t>(block - base_)); }

}  // namespace resurgo
