#include "gpu/device_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

#include "base/units.h"
#include "base/clock.h"
#include "resurgo/errors.hpp"

namespace resurgo::gpu {

namespace {
constexpr std::size_t kNowhere = std::numeric_limits<std::size_t>::max();
// Versions start on this boundary: full-speed copies, whatever the spans.
constexpr std::size_t kAlignment = 256;

}  // namespace

DeviceCache::DeviceCache(std::unique_ptr<DeviceMemory> memory, DeviceCacheOptions options, const Logger& log)
    : memory_(std::move(memory)),
      log_(log),
      memory_name_(memory_->name()),
      on_wait_(std::move(options.on_wait)),
      opened_(Clock::now()) {
  if (options.capacity == 0 || options.chunk == 0) {
    throw InvalidArgumentError("device cache: capacity and chunk must be positive (capacity " +
                               std::to_string(options.capacity) + ", chunk " + std::to_string(options.chunk) + ")");
  }
  const std::size_t granularity = memory_->granularity();
  capacity_ = round_up(options.capacity, granularity);
  chunk_ = std::min(round_up(options.chunk, granularity), capacity_);
  memory_->reserve(capacity_);
  counters_.capacity = capacity_;
  counters_.device = memory_->device();
  log_.info("device cache on " + memory_name_ + ": " + size_text(capacity_) + " reserved, mapped " +
            size_text(chunk_) + " at a time");
  mapper_ = std::thread([this] { map_chunks(); });
}

DeviceCache::~DeviceCache() {
  close();
  mapper_.join();
}

void DeviceCache::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

void DeviceCache::map_chunks() {
  std::string stopped;
  for (std::size_t offset = 0; offset < capacity_;) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) break;
    }
    const std::size_t bytes = std::min(chunk_, capacity_ - offset);
    try {
      if (memory_->map(offset, bytes) == MapResult::kOutOfMemory) stopped = "out of memory";
    } catch (const std::exception& error) {
      stopped = error.what();
    }
    if (!stopped.empty()) {
      log_.warn("device cache on " + memory_name_ + ": mapping stopped after " + size_text(offset) + " of " +
                size_text(capacity_) + " (" + stopped + "); the cache keeps working with " + size_text(offset));
      break;
    }
    offset += bytes;
    std::lock_guard lock(mutex_);
    mapped_ = offset;
    changed_.notify_all();
  }
  std::lock_guard lock(mutex_);
  growth_done_ = true;
  counters_.growth_stopped = stopped;
  counters_.mapping_seconds = seconds_since(opened_);
  changed_.notify_all();
}

void DeviceCache::wait_growth_done() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return growth_done_; });
}

// Versions lie in [tail, head_) when the range has not wrapped since the
// oldest was placed, else in [tail, end of range) and [0, head_).
std::size_t DeviceCache::place(std::size_t bytes, std::size_t limit) const {
  if (fifo_.empty()) return bytes <= limit ? 0 : kNowhere;
  const std::size_t tail = fifo_.front().offset;
  if (head_ > tail) {
    if (head_ + bytes <= limit) return head_;
    return bytes <= tail ? 0 : kNowhere;
  }
  return head_ + bytes <= tail ? head_ : kNowhere;
}

void DeviceCache::wait(std::unique_lock<std::mutex>& lock, const char* reason, const char*& announced,
                       double& seconds) {
  const Clock::time_point start = Clock::now();
  if (announced != reason) {
    // Told once per reason, without the lock; the caller then looks again,
    // so a change made meanwhile is not missed.
    announced = reason;
    if (on_wait_) {
      lock.unlock();
      on_wait_(reason);
      lock.lock();
    }
  } else {
    changed_.wait(lock);
  }
  seconds += seconds_since(start);
}

CaptureResult DeviceCache::capture(std::int64_t version, const std::vector<CaptureSpan>& spans) {
  return copy_into_cache(version, spans, false);
}

CaptureResult DeviceCache::stage(std::int64_t version, const std::vector<CaptureSpan>& spans) {
  return copy_into_cache(version, spans, true);
}

CaptureResult DeviceCache::copy_into_cache(std::int64_t version, const std::vector<CaptureSpan>& spans, bool staged) {
  std::size_t total = 0;
  for (const CaptureSpan& span : spans) total += span.bytes;
  const std::size_t bytes = std::max(round_up(total, kAlignment), kAlignment);  // never empty: head_ moves
  std::lock_guard one_capture(capture_mutex_);
  std::unique_lock lock(mutex_);
  if (find(version) != nullptr) {
    throw InvalidArgumentError("device cache: version " + std::to_string(version) + " is cached already");
  }
  CaptureResult result;
  const std::size_t offset = make_room(lock, version, total, bytes, staged, result);
  counters_.map_wait_seconds += result.map_wait_seconds;
  counters_.flush_wait_seconds += result.flush_wait_seconds;
  if (result.status != CaptureResult::Status::kCached) return result;

  fifo_.push_back(Entry{version, offset, bytes, total});
  fifo_.back().staged = staged;
  head_ = offset + bytes;
  lock.unlock();
  try {
    copy_in(offset, spans);
  } catch (...) {
    lock.lock();
    fifo_.pop_back();  // captures are serialised: the newest is this one
    head_ = fifo_.empty() ? 0 : offset;
    changed_.notify_all();
    throw;
  }
  lock.lock();
  find(version)->complete = true;
  changed_.notify_all();
  return result;
}

// Evicts the oldest versions once flushed (and not being read) while the
// space is needed and the cache fully mapped, and waits for chunks to be
// mapped or versions to be flushed otherwise. Caller holds `lock`.
std::size_t DeviceCache::make_room(std::unique_lock<std::mutex>& lock, std::int64_t version, std::size_t total,
                                   std::size_t bytes, bool staged, CaptureResult& result) {
  const char* announced = nullptr;
  for (;;) {
    if (closed_) {
      result.status = CaptureResult::Status::kClosed;
      return kNowhere;
    }
    const std::size_t limit = growth_done_ ? mapped_ : capacity_;
    if (bytes > limit) {
      if (!staged) log_bypass(version, total, limit);
      result.status = CaptureResult::Status::kTooLarge;
      return kNowhere;
    }
    const std::size_t offset = place(bytes, limit);
    if (offset != kNowhere && offset + bytes <= mapped_) return offset;
    if (offset != kNowhere || !growth_done_) {
      wait(lock, "mapping", announced, result.map_wait_seconds);
      continue;
    }
    const Entry& oldest = fifo_.front();
    // A staged version not restored yet gives way to a capture (its restart
    // reads the next levels): the application may checkpoint before it
    // restores it, and waiting for that restart would wait for ever.
    const bool droppable = oldest.flushed || oldest.removed || (oldest.staged && !staged);
    if (droppable && oldest.readers == 0) {
      fifo_.pop_front();
      counters_.evicted++;
      if (fifo_.empty()) head_ = 0;
      continue;
    }
    if (staged) {
      result.status = CaptureResult::Status::kNoRoom;
      return kNowhere;
    }
    wait(lock, oldest.flushed ? "read" : "flush", announced, result.flush_wait_seconds);
  }
}

// A warning the first time, debug lines after. Caller holds mutex_.
void DeviceCache::log_bypass(std::int64_t version, std::size_t total, std::size_t limit) {
  counters_.bypassed++;
  const std::string message = "device cache on " + memory_name_ + ": version " + std::to_string(version) + " (" +
                              size_text(total) + ") is larger than the cache (" + size_text(limit) +
                              "); it bypasses the cache to the next level";
  if (counters_.bypassed == 1) {
    log_.warn(message);
  } else {
    log_.debug(message);
  }
}

void DeviceCache::copy_in(std::size_t offset, const std::vector<CaptureSpan>& spans) {
  for (const CaptureSpan& span : spans) {
    memory_->copy_in(offset, span.source, span.bytes);
    offset += span.bytes;
  }
  memory_->wait_copies_in();
}

void DeviceCache::flushed(std::int64_t version) {
  std::lock_guard lock(mutex_);
  Entry* entry = find(version);
  if (entry == nullptr || !entry->complete) {
    throw NotFoundError("device cache: version " + std::to_string(version) + " is not cached; cannot mark it flushed");
  }
  entry->flushed = true;
  changed_.notify_all();
}

void DeviceCache::read(std::int64_t version, std::size_t offset, void* target, std::size_t bytes) {
  std::unique_lock lock(mutex_);
  Entry* entry = find(version);
  if (entry == nullptr || !entry->complete) {
    throw NotFoundError("device cache: version " + std::to_string(version) + " is not cached");
  }
  if (offset > entry->bytes || bytes > entry->bytes - offset) {
    throw InvalidArgumentError("device cache: bytes [" + std::to_string(offset) + ", " +
                               std::to_string(offset + bytes) + ") lie outside version " + std::to_string(version) +
                               " (" + std::to_string(entry->bytes) + " bytes)");
  }
  const std::size_t start = entry->offset + offset;
  entry->readers++;  // not evicted while read; deque elements do not move
  lock.unlock();
  auto done = [&] {
    lock.lock();
    entry->readers--;
    changed_.notify_all();
  };
  try {
    memory_->copy_out(start, target, bytes);
  } catch (...) {
    done();
    throw;
  }
  done();
}

bool DeviceCache::hold(std::int64_t version) {
  std::lock_guard lock(mutex_);
  Entry* entry = find(version);
  if (entry == nullptr || !entry->complete) return false;
  entry->readers++;
  return true;
}

// A discard may have removed it meanwhile: it stays in the queue, unevicted,
// until its readers are done.
void DeviceCache::unhold(std::int64_t version) {
  std::lock_guard lock(mutex_);
  const auto held = std::find_if(fifo_.begin(), fifo_.end(),
                                 [version](const Entry& entry) { return entry.version == version && entry.readers > 0; });
  if (held == fifo_.end()) return;
  held->readers--;
  changed_.notify_all();
}

bool DeviceCache::contains(std::int64_t version) const {
  std::lock_guard lock(mutex_);
  const Entry* entry = find(version);
  return entry != nullptr && entry->complete;
}

std::vector<std::int64_t> DeviceCache::versions() const {
  std::lock_guard lock(mutex_);
  std::vector<std::int64_t> found;
  for (const Entry& entry : fifo_) {
    if (entry.complete && !entry.removed) found.push_back(entry.version);
  }
  return found;
}

std::optional<std::size_t> DeviceCache::size_of(std::int64_t version) const {
  std::lock_guard lock(mutex_);
  const Entry* entry = find(version);
  if (entry == nullptr || !entry->complete) return std::nullopt;
  return entry->size;
}

void DeviceCache::remove(std::int64_t version) {
  std::lock_guard lock(mutex_);
  Entry* entry = find(version);
  if (entry == nullptr || !entry->complete) {
    throw NotFoundError("device cache: version " + std::to_string(version) + " is not cached; cannot remove it");
  }
  entry->removed = true;
  changed_.notify_all();
}

bool DeviceCache::discard(std::int64_t version) {
  std::lock_guard lock(mutex_);
  Entry* entry = find(version);
  if (entry == nullptr || !entry->complete || !(entry->flushed || entry->staged)) return false;
  entry->removed = true;
  changed_.notify_all();
  return true;
}

DeviceCacheStats DeviceCache::stats() const {
  std::lock_guard lock(mutex_);
  DeviceCacheStats stats = counters_;
  stats.mapped = mapped_;
  stats.growth_done = growth_done_;
  for (const Entry& entry : fifo_) {
    if (entry.removed) continue;
    stats.versions++;
    stats.used += entry.bytes;
  }
  return stats;
}

// Removed entries are no longer there for anyone but the eviction.
DeviceCache::Entry* DeviceCache::find(std::int64_t version) {
  auto it = std::find_if(fifo_.begin(), fifo_.end(),
                         [version](const Entry& e) { return e.version == version && !e.removed; });
  return it == fifo_.end() ? nullptr : &*it;
}

const DeviceCache::Entry* DeviceCache::find(std::int64_t version) const {
  return const_cast<DeviceCache*>(this)->find(version);
}

}  // namespace resurgo::gpu
