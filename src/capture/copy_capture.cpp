#include "capture/copy_capture.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/clock.h"
#include "base/crash_point.h"
#include "base/thread_pool.h"

namespace resurgo {

namespace {


// One core alone does not reach the memory bandwidth, so the copy is split
// into pieces that the application thread and idle pipeline workers take in
// turn; a busy worker leaves its share to the application thread.
constexpr std::uint64_t kCapturePiece = 4u << 20;


struct Piece {
  const std::byte* from;
  std::byte* to;
  std::size_t bytes;
};

}  // namespace

std::uint64_t CopyCapture::wanted_capacity(std::uint64_t state_bytes) const {
  return context_.config.buffer.capacity > 0 ? context_.config.buffer.capacity : default_buffer_capacity(state_bytes);
}

bool CopyCapture::fits(std::uint64_t state_bytes) const { return state_bytes <= wanted_capacity(state_bytes); }

const char* CopyCapture::mode(std::uint64_t state_bytes) const { return fits(state_bytes) ? "copy" : "synchronous"; }

// The buffer is (re)made as soon as the protected set is known so that its
// pages are faulted in while the application computes, not during capture.
// It can only be remade once every block in it was written, and is remade
// only when too small: a protected set that changes region by region
// between two checkpoints (a layer above the store swapping one piece for
// another) keeps its buffer and its faulted-in pages, and never waits for
// the writes. It does not shrink while the store is open. A small state may
// go straight to the memory level at every checkpoint (take()): its buffer
// is made by the first capture that needs one.
void CopyCapture::resize(std::uint64_t state_bytes) {
  if (state_bytes > kStraightToMemoryBytes) grow(state_bytes);
}

void CopyCapture::grow(std::uint64_t state_bytes) {
  const std::uint64_t wanted = wanted_capacity(state_bytes);
  if (state_bytes == 0 || (buffer_ && buffer_->capacity() >= wanted)) return;
  if (buffer_) buffer_->wait_empty();
  buffer_.reset();
  buffer_ = std::make_shared<HostBuffer>(wanted);
}

void CopyCapture::restarting(bool restarting) {
  if (buffer_) buffer_->pause_prefault(restarting);
}

// Pages the background prefault has not reached are faulted in before the
// copy, in parallel, so that the stats can tell first-touch time from copy time.
void CopyCapture::fault_in(std::byte* block, std::uint64_t bytes, CaptureTimes& times) {
  const auto [begin, end] = buffer_->untouched(block, bytes);
  if (begin == end) return;
  const Clock::time_point started = Clock::now();
  const std::uint64_t pieces = (end - begin + kCapturePiece - 1) / kCapturePiece;
  context_.pool.parallel_for(pieces, [&](std::size_t i) {
    const std::uint64_t offset = begin + i * kCapturePiece;
    const std::uint64_t length = std::min(kCapturePiece, end - offset);
    if (::madvise(block + offset, length, MADV_POPULATE_WRITE) != 0) {
      std::memset(block + offset, 0, length);  // old kernel: touch by hand
    }
  });
  buffer_->mark_touched(block, bytes);
  times.first_touch_seconds = seconds_since(started);
}

// Each extent moves to the next free bytes of `block` and points there afterwards.
void CopyCapture::copy(std::vector<Extent>& extents, std::byte* block, CaptureTimes& times) {
  std::vector<Piece> pieces;
  std::byte* cursor = block;
  for (Extent& extent : extents) {
    for (std::uint64_t offset = 0; offset < extent.bytes; offset += kCapturePiece) {
      pieces.push_back({extent.source + offset, cursor + offset, std::min(kCapturePiece, extent.bytes - offset)});
    }
    extent.source = cursor;
    cursor += extent.bytes;
  }
  const Clock::time_point started = Clock::now();
  context_.pool.parallel_for(pieces.size(),
                             [&](std::size_t i) { std::memcpy(pieces[i].to, pieces[i].from, pieces[i].bytes); });
  times.copy_seconds = seconds_since(started);
}

// A small version bound for the memory level first skips the staging
// buffer: the first level's write, on the application's thread, is its one
// copy (and its checksums), and no worker is woken for it. A large one is
// copied into the buffer in parallel and checksummed off the application's
// path.
Snapshot CopyCapture::take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                           CaptureTimes& times) {
  std::vector<Extent> extents = whole_regions(regions);
  const Level::Features first = first_level.features();
  if (first.is_volatile && !first.device && total_bytes(extents) <= kStraightToMemoryBytes) {
    Snapshot snapshot;
    snapshot.header = std::move(header);
    snapshot.extents = std::move(extents);
    snapshot.synchronous = true;
    snapshot.into_memory_level = true;
    return snapshot;
  }
  return capture(std::move(extents), std::move(header), times);
}

Snapshot CopyCapture::capture(std::vector<Extent> extents, format::Header header, CaptureTimes& times) {
  const std::uint64_t total = total_bytes(extents);
  Snapshot snapshot;
  snapshot.header = std::move(header);
  if (!fits(total)) {
    if (!warned_synchronous_) {
      context_.log.warn("protected state of " + std::to_string(total) + " bytes exceeds the host buffer of " +
                        std::to_string(wanted_capacity(total)) +
                        " bytes; checkpoints are written synchronously from the application's memory "
                        "(set buffer.capacity, or capture.mode = \"auto\" to fork instead)");
      warned_synchronous_ = true;
    }
    snapshot.synchronous = true;
    snapshot.extents = std::move(extents);
    return snapshot;
  }
  if (total == 0) return snapshot;  // a delta of an interval that wrote nothing
  const Clock::time_point waited = Clock::now();
  // The buffer is sized for the whole protected state (resize); a delta
  // takes a smaller block of it.
  // Replacing a buffer waits for its blocks to be written; making the first
  // one waits for nothing. Only the application thread allocates: room
  // found now is still there.
  const bool replaces = buffer_ && buffer_->capacity() < total;
  if (!buffer_ || replaces) grow(total);
  const bool waits = replaces || !buffer_->has_room(total);
  std::byte* block = buffer_->allocate(total);
  times.backpressure_seconds = waits ? seconds_since(waited) : 0;
  context_.capturing(true);
  try {
    fault_in(block, total, times);
    copy(extents, block, times);
  } catch (...) {
    context_.capturing(false);  // else evictions, and so drain and close, would wait forever
    buffer_->release(block);    // the ring would stay full forever
    throw;
  }
  context_.capturing(false);
  RESURGO_CRASH_POINT("capture.copied", 0);
  snapshot.extents = std::move(extents);
  snapshot.release = [buffer = buffer_, block] { buffer->release(block); };
  return snapshot;
}

}  // namespace resurgo
