#include "capture/device_capture.h"

#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

namespace resurgo {

DeviceCapture::DeviceCapture(std::unique_ptr<Capture> host, const CaptureContext& context)
    : host_(std::move(host)),
      config_(context.config),
      log_(context.log),
      l0_(context.device_level),
      l1_(context.memory_level) {}

DeviceCapture::~DeviceCapture() = default;

Snapshot DeviceCapture::take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                             CaptureTimes& times) {
  if (!device_) return host_->take(regions, std::move(header), first_level, times);
  return device_->take(*host_, regions, std::move(header), first_level, times);
}

void DeviceCapture::check(Region& region, const std::string& store) {
  if (region.kind == MemoryKind::kHost) {
    const std::optional<gpu::PointerInfo> found =
        region.data ? gpu::describe_if_cuda_is_loaded(region.data) : std::nullopt;
    if (found && found->kind == MemoryKind::kDevice) refuse_memory_kind(region, store, found->kind);
    if (!found || found->kind != MemoryKind::kManaged) return;
    region.kind = MemoryKind::kManaged;
  }
  const std::string what = std::string(region.kind == MemoryKind::kDevice ? "device" : "managed") + " region '" +
                           region.label + "' of store '" + store + "'";
  if (config_.capture.mode == CaptureMode::kAuto) {
    throw InvalidArgumentError("cannot protect " + what +
                               ": capture.mode = auto chooses copy or fork per region from host write rates, which "
                               "device and managed regions have none of; use capture.mode = fork (drains them to "
                               "host memory, then forks), copy or delta");
  }
  if (!device_) {
    device_ = open_device_regions(region, what);
    device_->set_capture_streams(capture_streams_);
  }
  device_->check(region, store);
  if (region.kind == MemoryKind::kManaged && config_.capture.mode == CaptureMode::kDelta) {
    log_.info(what + " is captured in full at every version: delta mode tracks the host's writes, and cannot see "
                     "those of GPU kernels to managed memory");
  }
}

// The device side opens at the first device or managed region, which names
// `what` in the error when the driver cannot be used.
std::unique_ptr<DeviceRegions> DeviceCapture::open_device_regions(const Region& region, const std::string& what) {
  try {
    return std::make_unique<DeviceRegions>(config_, l0_, DeviceRegions::device_of(config_, l0_, region), log_, l1_);
  } catch (const gpu::GpuError& error) {
    throw gpu::GpuError("cannot protect " + what + ": " + error.what() +
                            "; device and managed memory need a usable CUDA driver (device.backend = \"host\" "
                            "takes host memory standing for them, for tests)",
                        error.result());
  }
}

std::unique_ptr<RestartTargets> DeviceCapture::restart_targets(const Registry& registry, int version) {
  if (!registry.has_device_regions()) return host_->restart_targets(registry, version);
  return std::make_unique<DeviceRestart>(registry, *device_, version);
}

void DeviceCapture::set_capture_streams(std::vector<void*> streams) {
  capture_streams_ = std::move(streams);
  if (device_) device_->set_capture_streams(capture_streams_);
}

DeviceStats DeviceCapture::device_stats() const {
  if (device_) return device_->stats();
  DeviceStats stats;
  if (l0_) stats.cache = l0_->stats();
  return stats;
}

}  // namespace resurgo
