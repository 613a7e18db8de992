// The device regions' part of a version (docs/gpu.md; HiPC'22 cache paper,
// section IV). On the application thread, checkpoint() copies them device to
// device into the L0 device cache and returns; on the first level's worker,
// the Snapshot's `stage` copies them out of L0 into host memory for the
// writer and tells the cache the version is flushed, so that it may be
// evicted (first in, first out) once the cache is full. Without L0, or for a
// version the cache cannot hold, the regions are copied device to host before
// checkpoint() returns (the L0 bypass, logged by the cache).
//
// Once checkpoint() returned, the version no longer reads the application's
// device memory (L0 and the host copy are the store's own), so a device
// region may be freed right after unprotect().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "capture/capture.h"
#include "core/log.h"
#include "core/registry.h"
#include "gpu/device_access.h"
#include "gpu/device_cache.h"
#include "resurgo/config.hpp"

namespace resurgo {

class DeviceCapture {
 public:
  // Opens the backend `config.device.backend` names and, when
  // `config.device.capacity` > 0, the L0 cache (its mapping starts at once).
  // Throws GpuError when the backend cannot be used (no driver, no device),
  // saying why.
  DeviceCapture(const Config& config, const Logger& log);
  ~DeviceCapture();
  DeviceCapture(const DeviceCapture&) = delete;
  DeviceCapture& operator=(const DeviceCapture&) = delete;

  gpu::DeviceAccess& access() { return *access_; }

  // The version `header` describes: the host and managed regions of
  // `regions` through `host_capture`, the device regions into L0 (or host
  // memory). Region i of `regions` is region i of the header.
  Snapshot take(Capture& host_capture, const std::vector<Region>& regions, format::Header header,
                Level& first_level, CaptureTimes& times);

  // The L0 cache's counters; none without L0.
  std::optional<gpu::DeviceCacheStats> cache_stats() const;

 private:
  struct Staging;

  void take_device_regions(const std::vector<Region>& regions, Snapshot& snapshot, CaptureTimes& times);
  void take_into_cache(std::int64_t version, const std::vector<const Region*>& device, Snapshot& snapshot,
                       const std::shared_ptr<Staging>& staging);
  void take_to_host(const std::vector<const Region*>& device, Staging& staging);

  const Logger& log_;
  std::unique_ptr<gpu::DeviceAccess> access_;
  std::shared_ptr<gpu::DeviceCache> cache_;  // shared with the stage hooks of versions in flight
};

// Restart into device regions: restore fills host copies of them (the
// regions of registry()), and write_back() copies those to device memory,
// so that a restore that fails leaves the device regions as they were.
class DeviceRestart {
 public:
  DeviceRestart(const Registry& registry, gpu::DeviceAccess& access);
  const Registry& registry() const { return staged_; }
  void write_back();

 private:
  struct Copy {
    Region device;
    std::unique_ptr<std::byte[]> host;
  };
  gpu::DeviceAccess& access_;
  Registry staged_;
  std::vector<Copy> copies_;
};

}  // namespace resurgo
