#include "capture/host_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/thread_priority.h"
#include "base/trace.h"
#include "resurgo/errors.hpp"

namespace resurgo {

HostBuffer::HostBuffer(std::uint64_t capacity)
    : capacity_(capacity),
      ring_(capacity),
      pieces_(std::make_unique<std::atomic<std::uint8_t>[]>((capacity + kPiece - 1) / kPiece)),
      piece_count_((capacity + kPiece - 1) / kPiece) {
  void* memory = ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw StorageError("cannot reserve a host buffer of " + std::to_string(capacity_) +
                       " bytes: " + std::strerror(errno) + "; lower buffer.capacity");
  }
  base_ = static_cast<std::byte*>(memory);
  ::madvise(base_, capacity_, MADV_HUGEPAGE);  // fewer faults and TLB misses; optional
}

HostBuffer::~HostBuffer() {
  {
    std::lock_guard lock(mutex_);
    stop_prefault_ = true;
  }
  prefault_resumed_.notify_all();
  if (prefaulter_.joinable()) prefaulter_.join();
  ::munmap(base_, capacity_);
}

void HostBuffer::start_prefault(std::uint64_t ahead) {
  ahead_.store(std::max<std::uint64_t>(ahead, 1), std::memory_order_relaxed);
  if (!prefaulter_.joinable()) {
    prefaulter_ = std::thread([this] { prefault(); });
    return;
  }
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    wake = prefault_due();  // a farther `ahead` may hold untouched pieces
  }
  if (wake) prefault_resumed_.notify_all();
}

// It runs at SCHED_BATCH (base/thread_priority.h): at SCHED_IDLE (as
// before) it never ran on a machine whose cores were busy with the
// application and the pipeline, and the first checkpoints paid the first
// touch; at normal priority, woken at the end of a capture on such a
// machine, it took the capture's core before checkpoint() returned, and
// the saves of small versions, whose ring goes round a buffer of many of
// them, waited for its touch of the ring's first lap. It pauses while a
// capture copies (which faults in its own untouched pieces) and while a
// restart runs, which it used to slow down up to 7x; it stops between two
// pieces. With the pieces ahead touched it waits for the end of a capture
// that moved the ring on to untouched ones (pause_prefault wakes it then).
void HostBuffer::prefault() {
  make_this_thread_batch();
  Trace::name_this_thread("prefault");  // named once its policy is set: it can be found by name
  while (!all_touched()) {
    {
      std::unique_lock lock(mutex_);
      prefault_resumed_.wait(lock, [&] { return stop_prefault_ || prefault_due(); });
      if (stop_prefault_) return;
    }
    prefault_next();
  }
}

// The background touch is woken only when it has a piece to touch: a wake
// at the end of every capture, most of which leave the pieces ahead
// touched, would cost the capturing thread a system call and, on a busy
// core, a turn of the scheduler.
void HostBuffer::pause_prefault(Pause why, bool paused) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    const auto bit = static_cast<std::uint8_t>(why);
    prefault_pauses_ = static_cast<std::uint8_t>(paused ? prefault_pauses_ | bit : prefault_pauses_ & ~bit);
    wake = !paused && prefault_due();
  }
  if (wake) prefault_resumed_.notify_all();
}

bool HostBuffer::prefault_due() const { return prefault_pauses_ == 0 && untouched_ahead(); }

// The next block begins at next_offset(): the pieces from there on are the
// next ones a capture copies into, and those behind it were copied into
// already (or hold blocks still in flight) unless the ring wrapped.
std::optional<std::uint64_t> HostBuffer::prefault_next() {
  const std::uint64_t first = ring_.next_offset() / kPiece;
  for (std::uint64_t i = 0; i < pieces_ahead(); ++i) {
    const std::uint64_t piece = (first + i) % piece_count_;
    if (pieces_[piece].load(std::memory_order_relaxed) == kUntouched && touch_piece(piece)) return piece * kPiece;
  }
  return std::nullopt;
}

std::uint64_t HostBuffer::pieces_ahead() const {
  const std::uint64_t ahead = std::min(ahead_.load(std::memory_order_relaxed), capacity_);
  const std::uint64_t next = ring_.next_offset();
  const std::uint64_t last = (next + ahead - 1) / kPiece;
  return std::min(piece_count_, last - next / kPiece + 1);
}

bool HostBuffer::untouched_ahead() const {
  const std::uint64_t first = ring_.next_offset() / kPiece;
  for (std::uint64_t i = 0; i < pieces_ahead(); ++i) {
    if (pieces_[(first + i) % piece_count_].load(std::memory_order_relaxed) == kUntouched) return true;
  }
  return false;
}

bool HostBuffer::all_touched() const {
  for (std::uint64_t piece = 0; piece < piece_count_; ++piece) {
    if (pieces_[piece].load(std::memory_order_acquire) != kTouched) return false;
  }
  return true;
}

// MADV_POPULATE_WRITE faults pages in without changing their contents, so
// a piece may be touched while another thread copies into or reads a block
// that shares it. On a kernel without it (before 5.14) the piece counts as
// touched and its pages fault on use, as they would anyway.
bool HostBuffer::touch_piece(std::uint64_t piece) {
  std::uint8_t expected = kUntouched;
  if (!pieces_[piece].compare_exchange_strong(expected, kTouching)) return false;
  const std::uint64_t offset = piece * kPiece;
  ::madvise(base_ + offset, std::min(kPiece, capacity_ - offset), MADV_POPULATE_WRITE);
  pieces_[piece].store(kTouched, std::memory_order_release);
  return true;
}

double HostBuffer::touch(const std::byte* at) {
  const std::uint64_t piece = offset_of(at) / kPiece;
  if (pieces_[piece].load(std::memory_order_acquire) != kUntouched) return 0;
  const Clock::time_point started = Clock::now();
  return touch_piece(piece) ? seconds_since(started) : 0;
}

bool HostBuffer::touched(std::uint64_t offset) const {
  return pieces_[offset / kPiece].load(std::memory_order_acquire) == kTouched;
}

std::byte* HostBuffer::allocate(std::uint64_t bytes) { return base_ + ring_.allocate(bytes); }

void HostBuffer::release(const std::byte* block) { ring_.release(offset_of(block)); }

}  // namespace resurgo
