#include "capture/device_capture.h"

#include "gpu/device_access.h"
#include "resurgo/errors.hpp"

namespace resurgo {

DeviceCapture::DeviceCapture(std::unique_ptr<Capture> host, const CaptureContext& context)
    : host_(std::move(host)), config_(context.config), log_(context.log), l0_(context.device_level) {}

DeviceCapture::~DeviceCapture() = default;

Snapshot DeviceCapture::take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                             CaptureTimes& times) {
  if (!device_) return host_->take(regions, std::move(header), first_level, times);
  return device_->take(*host_, regions, std::move(header), first_level, times);
}

void DeviceCapture::check(const Region& region, const std::string& store) {
  if (region.kind != MemoryKind::kDevice) {
    const std::optional<gpu::PointerInfo> found =
        region.data ? gpu::describe_if_cuda_is_loaded(region.data) : std::nullopt;
    if (found && found->kind == MemoryKind::kDevice) refuse_memory_kind(region, store, found->kind);
    return;
  }
  if (config_.capture.mode == CaptureMode::kFork || config_.capture.mode == CaptureMode::kAuto) {
    throw InvalidArgumentError("cannot protect device region '" + region.label + "' of store '" + store +
                               "': capture.mode = fork (or auto) writes versions from a child process, which cannot "
                               "reach device memory; use capture.mode = copy or delta");
  }
  if (!device_) {
    device_ = std::make_unique<DeviceRegions>(config_, l0_, DeviceRegions::device_of(config_, l0_, region), log_);
  }
  device_->check(region, store);
}

std::unique_ptr<RestartTargets> DeviceCapture::restart_targets(const Registry& registry, int version) {
  if (!registry.has_device_regions()) return host_->restart_targets(registry, version);
  return std::make_unique<DeviceRestart>(registry, *device_, version);
}

DeviceStats DeviceCapture::device_stats() const {
  if (device_) return device_->stats();
  DeviceStats stats;
  if (l0_) stats.cache = l0_->stats();
  return stats;
}

}  // namespace resurgo
