// The L0 device cache (HiPC'22 cache-allocation paper, section IV-A): the
// whole capacity's address range is reserved at open, and physical memory is
// mapped into it chunk by chunk on a background thread. A capture may use any
// mapped part and waits only when the space it needs is not mapped yet.
// Versions are kept first in, first out, each one contiguous in the range; a
// version is evicted only after its owner said it was flushed to the next
// level, and only when the cache is fully mapped (or stopped growing) and the
// next version does not fit otherwise.
//
// Thread safety: every member may be called from any thread. Captures are
// serialised (one capture stream); reads and flushed() run beside them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "gpu/device_memory.h"
#include "resurgo/device_stats.hpp"

namespace resurgo::gpu {

using resurgo::DeviceCacheStats;

struct DeviceCacheOptions {
  std::size_t capacity = 0;                  // rounded up to the memory's granularity
  std::size_t chunk = std::size_t{1} << 30;  // mapped at a time; rounded likewise
  // Called (under no lock) each time a capture starts to wait, with what it
  // waits for: "mapping", "flush", or "read" (the oldest version is being
  // read). For statistics, logs and tests.
  std::function<void(const char* reason)> on_wait;
};

// One piece of a version: `bytes` from `source` (device memory, or host
// memory).
struct CaptureSpan {
  const void* source;
  std::size_t bytes;
};

struct CaptureResult {
  enum class Status {
    kCached,    // the version is in the cache
    kTooLarge,  // larger than the cache (or than what could be mapped): write it to L1 instead
    kClosed,    // close() was called while the capture waited
    kNoRoom,    // stage() only: the space is held by versions not flushed or consumed yet
  };
  Status status = Status::kCached;
  double map_wait_seconds = 0;    // waited for chunks to be mapped
  double flush_wait_seconds = 0;  // waited for the oldest version to be flushed (or read)
};

class DeviceCache {
 public:
  // Reserves the range and starts mapping it. Throws GpuError when the
  // reservation fails, InvalidArgumentError for a zero capacity or chunk.
  DeviceCache(std::unique_ptr<DeviceMemory> memory, DeviceCacheOptions options, const Logger& log);
  // close(), then waits for the mapping thread and gives the memory back.
  ~DeviceCache();
  DeviceCache(const DeviceCache&) = delete;
  DeviceCache& operator=(const DeviceCache&) = delete;

  // Copies the spans, one after the other, into a new version and returns
  // once the copies are done. Waits while the space is not mapped yet or the
  // oldest version is not flushed yet. Throws InvalidArgumentError when
  // `version` is cached already, GpuError when a copy fails (the version is
  // then not cached).
  CaptureResult capture(std::int64_t version, const std::vector<CaptureSpan>& spans);
  // A prefetch's copy of a version the next levels hold (docs/adjoint.md):
  // as capture(), but it never waits for a version to be flushed or read
  // (kNoRoom instead), a version too large is not counted as a bypass, and
  // the version stays until flushed() (consumed), discard(), or a capture
  // that needs its room.
  CaptureResult stage(std::int64_t version, const std::vector<CaptureSpan>& spans);

  // The owner copied `version` to the next level: it may be evicted.
  // NotFoundError when it is not cached.
  void flushed(std::int64_t version);

  // Copies `bytes` at `offset` of cached `version` to `target` (device or
  // host memory) and waits for it; the version is not evicted meanwhile.
  // NotFoundError when it is not cached, InvalidArgumentError when the range
  // lies outside it.
  void read(std::int64_t version, std::size_t offset, void* target, std::size_t bytes);

  // Keeps cached `version` from eviction until unhold(), as a read does: a
  // restart that found it here reads it once the rest of the version was
  // read, and another thread (the prefetch's) may make room meanwhile.
  // False, holding nothing, when it is not cached.
  bool hold(std::int64_t version);
  void unhold(std::int64_t version);

  bool contains(std::int64_t version) const;
  // The versions cached, oldest first, and the bytes one was captured with.
  std::vector<std::int64_t> versions() const;
  std::optional<std::size_t> size_of(std::int64_t version) const;
  // Drops `version` now (it is no longer contained); its space comes back
  // when the versions before it are evicted. NotFoundError when it is not
  // cached.
  void remove(std::int64_t version);
  // Drops `version` when nothing waits for it (a staged version, or a
  // captured one already flushed) and returns true; false when it is not
  // cached or its flush is still to come (eviction takes it after that).
  bool discard(std::int64_t version);
  // Blocks until mapping ended (fully mapped, stopped, or closed).
  void wait_growth_done() const;
  // Wakes waiting captures, which return kClosed, and stops the mapping.
  void close();
  DeviceCacheStats stats() const;
  const std::string& memory_name() const { return memory_name_; }

 private:
  struct Entry {
    std::int64_t version;
    std::size_t offset;
    std::size_t bytes;  // of the range: the size captured, aligned
    std::size_t size;   // captured
    bool complete = false;  // the copies are done
    bool flushed = false;
    bool removed = false;   // dropped, its space not free yet
    bool staged = false;    // by stage(): the next levels hold it, no flush will come
    int readers = 0;
  };

  void map_chunks();
  // Where `bytes` would go given the free space, or SIZE_MAX when the oldest
  // version must go first. Caller holds mutex_.
  std::size_t place(std::size_t bytes, std::size_t limit) const;
  Entry* find(std::int64_t version);
  const Entry* find(std::int64_t version) const;
  // `staged`: a stage(), which never waits for a flush and is no bypass.
  CaptureResult copy_into_cache(std::int64_t version, const std::vector<CaptureSpan>& spans, bool staged);
  std::size_t make_room(std::unique_lock<std::mutex>& lock, std::int64_t version, std::size_t total, std::size_t bytes,
                        bool staged, CaptureResult& result);
  void log_bypass(std::int64_t version, std::size_t total, std::size_t limit);
  void copy_in(std::size_t offset, const std::vector<CaptureSpan>& spans);
  // Waits for a change, or first tells on_wait that the capture waits for
  // `reason`; adds the time to `seconds`.
  void wait(std::unique_lock<std::mutex>& lock, const char* reason, const char*& announced, double& seconds);

  const std::unique_ptr<DeviceMemory> memory_;
  const Logger& log_;
  const std::string memory_name_;
  std::function<void(const char*)> on_wait_;
  std::size_t capacity_ = 0;
  std::size_t chunk_ = 0;
  const Clock::time_point opened_;

  std::mutex capture_mutex_;  // one capture at a time: one stream, FIFO order kept
  mutable std::mutex mutex_;  // everything below
  mutable std::condition_variable changed_;
  std::deque<Entry> fifo_;  // oldest first
  std::size_t head_ = 0;    // where the next version starts when it fits there
  std::size_t mapped_ = 0;
  bool growth_done_ = false;
  bool closed_ = false;
  DeviceCacheStats counters_;
  std::thread mapper_;
};

}  // namespace resurgo::gpu
