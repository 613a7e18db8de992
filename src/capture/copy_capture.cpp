#include "capture/copy_capture.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>

#include "base/clock.h"
#include "base/crash_point.h"
#include "base/stream_copy.h"
#include "base/thread_pool.h"

namespace resurgo {

namespace {

struct Piece {
  const std::byte* from;
  std::byte* to;
  std::size_t bytes;
};

// One core alone does not reach the memory bandwidth, so the copy is split
// into units, one per piece of the buffer it writes to (HostBuffer::kPiece),
// that the application thread and idle pipeline workers take in turn; a
// busy worker leaves its share to the application thread. A unit is one or
// more extents' bytes (pieces), in the buffer's order.
struct CopyPlan {
  std::vector<Piece> pieces;
  std::vector<std::size_t> unit_starts;  // the first piece of each unit

  std::size_t units() const { return unit_starts.size(); }
  std::size_t unit_end(std::size_t unit) const {
    return unit + 1 < unit_starts.size() ? unit_starts[unit + 1] : pieces.size();
  }
};

// Versions of at least this many bytes are copied into the buffer with
// streaming stores (base/stream_copy.h): the block is memory the caches no
// longer hold (the ring, 64 MiB or more, is typically larger than the
// last-level cache), where an ordinary store first reads each line, and the
// worker that writes the block out reads it once, after a version this
// large has left the caches anyway. Against memcpy
// (bench/results/capture_streaming_stores.md, C++, and
// host_ab_streaming_stores*.md, Python at 256 MiB, each interleaved with
// the build before): 4 MiB to L2 blocked 299 against 629 us, 16 and 64 MiB
// into memory about a fifth less, 256 MiB 23.7 against 31.2 ms and 23.4
// against 33.0 ms in two runs. Smaller versions keep memcpy, which leaves
// them in the cache for their worker (the reason; not measured).
constexpr std::uint64_t kStreamingCopyBytes = HostBuffer::kPiece;

void copy_piece(const Piece& piece, bool around_caches) {
  if (around_caches) {
    copy_around_caches(piece.to, piece.from, piece.bytes);
  } else {
    std::memcpy(piece.to, piece.from, piece.bytes);
  }
}

// Each extent moves to the next free bytes of `block` and points there
// afterwards; its bytes are cut where the buffer's pieces meet.
CopyPlan plan_copy(std::vector<Extent>& extents, std::byte* block, const HostBuffer& buffer) {
  CopyPlan plan;
  std::byte* cursor = block;
  for (Extent& extent : extents) {
    for (std::uint64_t offset = 0; offset < extent.bytes;) {
      const std::uint64_t in_piece = buffer.offset_of(cursor + offset) % HostBuffer::kPiece;
      if (in_piece == 0 || plan.pieces.empty()) plan.unit_starts.push_back(plan.pieces.size());
      const std::uint64_t bytes = std::min(HostBuffer::kPiece - in_piece, extent.bytes - offset);
      plan.pieces.push_back({extent.source + offset, cursor + offset, bytes});
      offset += bytes;
    }
    extent.source = cursor;
    cursor += extent.bytes;
  }
  return plan;
}

// While a capture copies, the pipeline defers its evictions and the
// buffer's background touch waits: the capture wants the memory bandwidth,
// and faults in the pieces of its block that are still untouched itself.
// Both end with the copy, failed or not: evictions deferred for good would
// make drain and close wait forever.
class Copying {
 public:
  Copying(const CaptureContext& context, HostBuffer& buffer) : context_(context), buffer_(buffer) {
    context_.capturing(true);
    buffer_.pause_prefault(HostBuffer::Pause::kCapture, true);
  }
  ~Copying() {
    buffer_.pause_prefault(HostBuffer::Pause::kCapture, false);
    context_.capturing(false);
  }
  Copying(const Copying&) = delete;
  Copying& operator=(const Copying&) = delete;

 private:
  const CaptureContext& context_;
  HostBuffer& buffer_;
};

}  // namespace

// The default asks the kernel for the memory size, a system call: once per
// state size, not at every checkpoint (mode() is asked at each).
std::uint64_t CopyCapture::wanted_capacity(std::uint64_t state_bytes) const {
  if (context_.config.buffer.capacity > 0) return context_.config.buffer.capacity;
  if (state_bytes != sized_for_) {
    wanted_ = default_buffer_capacity(state_bytes);
    sized_for_ = state_bytes;
  }
  return wanted_;
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

// The background touch keeps the next two versions' pieces (all of a
// buffer of two) and one piece more touched. Small versions fill a piece
// many captures apart but may come closer together than a scheduler tick,
// which the background touch may wait for (HostBuffer::prefault): with a
// piece more it has the captures of a whole piece to get there, and the
// run holds at most one piece more than its ring reached.
void CopyCapture::grow(std::uint64_t state_bytes) {
  const std::uint64_t wanted = wanted_capacity(state_bytes);
  if (state_bytes == 0 || (buffer_ && buffer_->capacity() >= wanted)) return;
  if (buffer_) buffer_->wait_empty();
  buffer_.reset();
  buffer_ = std::make_shared<HostBuffer>(wanted);
  buffer_->start_prefault(2 * state_bytes + HostBuffer::kPiece);
}

void CopyCapture::restarting(bool restarting) {
  if (buffer_) buffer_->pause_prefault(HostBuffer::Pause::kRestart, restarting);
}

// The thread copying a unit whose piece of the buffer the background touch
// has not reached faults it in just before, in parallel with the others:
// the copy never waits for the whole block to be touched. The threads' time
// touching, against their time copying, splits the wall time into
// first_touch_seconds and copy_seconds.
void CopyCapture::copy(std::vector<Extent>& extents, std::byte* block, CaptureTimes& times) {
  const CopyPlan plan = plan_copy(extents, block, *buffer_);
  const bool around_caches = total_bytes(extents) >= kStreamingCopyBytes;
  std::vector<double> touching(plan.units());
  std::vector<double> copying(plan.units());
  const Clock::time_point started = Clock::now();
  context_.pool.parallel_for(plan.units(), total_bytes(extents), [&](std::size_t unit) {
    touching[unit] = buffer_->touch(plan.pieces[plan.unit_starts[unit]].to);
    const Clock::time_point copy_started = Clock::now();
    for (std::size_t i = plan.unit_starts[unit]; i < plan.unit_end(unit); ++i) {
      copy_piece(plan.pieces[i], around_caches);
    }
    copying[unit] = seconds_since(copy_started);
  });
  const double wall = seconds_since(started);
  const double touched = std::accumulate(touching.begin(), touching.end(), 0.0);
  const double busy = touched + std::accumulate(copying.begin(), copying.end(), 0.0);
  times.first_touch_seconds = busy > 0 ? wall * touched / busy : 0;
  times.copy_seconds = wall - times.first_touch_seconds;
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
  try {
    const Copying copying(context_, *buffer_);
    copy(extents, block, times);
  } catch (...) {
    buffer_->release(block);  // the ring would stay full forever
    throw;
  }
  RESURGO_CRASH_POINT("capture.copied", 0);
  snapshot.extents = std::move(extents);
  snapshot.release = [buffer = buffer_, block] { buffer->release(block); };
  return snapshot;
}

}  // namespace resurgo
