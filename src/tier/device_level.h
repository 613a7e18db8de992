// L0, the device level (HiPC'22 cache-allocation paper, section IV-A;
// docs/gpu.md): a Level whose storage is the L0 device cache, a range of GPU
// memory mapped incrementally (gpu/device_cache.h). What it holds for a
// version is the byte string it was given, in device memory: the device
// capture (capture/device_capture.h) puts there the version's device
// regions, laid end to end and copied device to device (`capture`), and
// restore takes them back from there (`read`); commit() and open() move any
// byte string through host memory, which is how the Level conformance suite
// drives it. The versions it holds are no container files, so restore and
// listings read the other levels (Route::readable leaves it out).
//
// First in, first out: a version is evicted only once released (the device
// capture releases it once it reached host memory; commit() at once), and
// only when the space is needed, oldest first.
//
// The backward pass (docs/adjoint.md, "Backward pass on the device"): the
// prefetch stages there the device regions of versions the next levels
// hold (`stage`), in the same layout as a capture; a staged version stays
// until restored (`consumed`) or discarded (`discard`), and the counters of
// the prefetch appear in stats().
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "gpu/device_cache.h"
#include "resurgo/config.hpp"
#include "resurgo/device_stats.hpp"
#include "tier/level.h"

namespace resurgo {

class DeviceLevel final : public Level {
 public:
  // L0 of `rank` of `store`: `capacity` bytes mapped `chunk` at a time on
  // device `device` of `backend`; mapping starts at once. Throws GpuError
  // when the backend cannot be used (no driver, no such device), saying why.
  DeviceLevel(const std::string& store, int rank, const Config::Device& config, int device, const Logger& log);
  ~DeviceLevel() override;

  int number() const override { return kL0; }
  Features features() const override;
  std::string where() const override;
  int device() const { return device_; }

  void prepare() override {}
  // The bytes `write` appends, copied to device memory; LevelFullError when
  // the cache cannot hold them.
  void commit(int version, const std::function<void(WritableFile&)>& write) override;
  void commit_copy(int version, const ReadableFile& source) override;

  std::vector<int> versions() override;
  bool holds(int version) override;
  // Reads through host memory. NotFoundError when the level does not hold it.
  std::unique_ptr<ReadableFile> open(int version) override;
  void quarantine(int version) override;
  void remove(int version) override;
  // Nothing: the cache evicts first in, first out when it needs the space.
  std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases = {}) override;

  // The device capture's side. Copies `spans` (device memory) into a new
  // version, device to device; kTooLarge and kClosed leave nothing.
  gpu::CaptureResult capture(int version, const std::vector<gpu::CaptureSpan>& spans);
  // Copies bytes [offset, offset + bytes) of `version` to `target` (device or
  // host memory) and waits for them.
  void read(int version, std::size_t offset, void* target, std::size_t bytes);
  // `version` is in host memory too: the cache may evict it.
  void release(int version);
  // Keeps `version` here until unhold() (gpu::DeviceCache::hold): false,
  // holding nothing, when it is not here.
  bool hold(int version) { return cache_->hold(version); }
  void unhold(int version) { cache_->unhold(version); }
  // The prefetch's side. Whether a version of `bytes` may fit at all (the
  // capacity); a refusal is counted.
  bool admit_prefetch(std::size_t bytes);
  // Copies `spans` (host memory) into a new version, never waiting for
  // space that versions still needed hold (kNoRoom); counts it staged, too
  // large or failed (a GpuError is rethrown).
  gpu::CaptureResult stage(int version, const std::vector<gpu::CaptureSpan>& spans);
  // A restart copied a staged version from here, device to device.
  void count_prefetch_restore() { restored_from_prefetch_++; }
  // The staged `version` is needed no more: it may be evicted.
  void consumed(int version);
  // Frees `version` unless a flush of it is still to come; whether it did.
  bool discard(int version);
  DeviceCacheStats stats() const;
  const std::string& memory_name() const { return cache_->memory_name(); }

 private:
  std::string store_;
  int rank_;
  int device_;
  std::unique_ptr<gpu::DeviceCache> cache_;
  std::size_t capacity_;
  std::atomic<std::uint64_t> prefetched_{0};
  std::atomic<std::uint64_t> prefetch_too_large_{0};
  std::atomic<std::uint64_t> prefetch_failed_{0};
  std::atomic<std::uint64_t> restored_from_prefetch_{0};
};

}  // namespace resurgo
