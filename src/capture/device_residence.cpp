#include "capture/device_residence.h"

namespace resurgo {

static_assert(format::kDeviceHost == gpu::kResidentOnHost && format::kDeviceUnknown == gpu::kResidenceUnknown,
              "a region's recorded device is what DeviceAccess::residence reports");

void record_residence(format::Header& header, const std::vector<Region>& regions, const gpu::DeviceAccess& access) {
  for (std::size_t index = 0; index < regions.size(); ++index) {
    const Region& region = regions[index];
    if (region.kind != MemoryKind::kManaged || region.bytes == 0) continue;
    header.regions[index].device = access.residence(region.data, region.bytes);
  }
}

RecordedDevices::RecordedDevices(int version, const std::vector<format::RegionEntry>& table) : version_(version) {
  for (const format::RegionEntry& entry : table) {
    if (entry.kind == format::RegionKind::kManaged && entry.device != format::kDeviceUnknown) {
      by_label_[entry.label] = entry.device;
    }
  }
}

std::optional<int> RecordedDevices::target(const Region& region, int store_device, int device_count,
                                           const Logger& log) const {
  const auto found = by_label_.find(region.label);
  if (found == by_label_.end()) return store_device;
  if (found->second == format::kDeviceHost) return std::nullopt;
  if (found->second < device_count) return found->second;
  log.warn("managed region '" + region.label + "' of version " + std::to_string(version_) + " was on device " +
           std::to_string(found->second) + ", and " + std::to_string(device_count) + " device" +
           (device_count == 1 ? " is" : "s are") + " visible; it is prefetched to the store's device " +
           std::to_string(store_device) + " instead; make that device visible "
           "(CUDA_VISIBLE_DEVICES) to put the region back where it was");
  return store_device;
}

}  // namespace resurgo
