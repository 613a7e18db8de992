// DeviceCapture: the Capture the Store uses (DESIGN.md, "Capture"). It wraps
// the capture of host regions (copy, fork, delta) and takes the device and
// managed regions itself (device_regions.h: device to device into L0, or to
// host memory at once): it owns the pointer-kind checks at protect(), the
// L0 path of a checkpoint, and the restart of device regions. The Store
// knows none of it. A store that never protects a device or managed region
// never loads the CUDA driver: the device side is opened at the first one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "capture/device_regions.h"

namespace resurgo {

class DeviceCapture final : public Capture {
 public:
  DeviceCapture(std::unique_ptr<Capture> host, const CaptureContext& context);
  ~DeviceCapture() override;

  const char* mode(std::uint64_t state_bytes) const override { return host_->mode(state_bytes); }
  void resize(std::uint64_t state_bytes) override { host_->resize(state_bytes); }
  // The host regions through the wrapped capture, the device and managed
  // regions into L0 (or host memory). Region i of `regions` is region i of
  // the header.
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;
  void restarting(bool restarting) override { host_->restarting(restarting); }
  void unprotected(int id) override { host_->unprotected(id); }
  void start_new_chain(const std::string& why) override { host_->start_new_chain(why); }

  // Host regions: a device pointer is refused where the process uses the
  // CUDA driver, and a managed pointer becomes a managed region (asked of
  // the driver only where the process loaded it: only then can it hold
  // some).
  // Device and managed regions: refused under capture.mode auto (its
  // choice rests on host write rates; fork drains them, then forks:
  // device_regions.h), without a usable driver (GpuError
  // naming the region), when the pointer is not memory of the region's
  // kind, or device memory of another device than the store's. Under delta
  // mode a managed region is logged as taken in full.
  void check(Region& region, const std::string& store) override;
  std::unique_ptr<RestartTargets> restart_targets(const Registry& registry, int version) override;
  DeviceStats device_stats() const override;
  void set_capture_streams(std::vector<void*> streams) override;

 private:
  std::unique_ptr<DeviceRegions> open_device_regions(const Region& region, const std::string& what);

  std::unique_ptr<Capture> host_;
  const Config& config_;
  const Logger& log_;
  DeviceLevel* const l0_;
  MemoryLevel* const l1_;  // its pieces pinned once device regions exist
  std::unique_ptr<DeviceRegions> device_;  // from the first device region
  std::vector<void*> capture_streams_;     // handed to device_, now or once it exists
};

}  // namespace resurgo
