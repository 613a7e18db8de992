// Where a restart puts each managed region back (issue 29; docs/gpu.md,
// "Managed memory"). A checkpoint records in the version, for each managed
// region, where the driver last put all of it (format::RegionEntry::device:
// the device or the host its last prefetch went to), and a restart
// prefetches the region back there: to the recorded device, not at all for
// the host, and to the store's device where nothing is recorded (a version
// 1 or 2 file, a region never prefetched) or where the record names a
// device this process does not have (a damaged or foreign file, fewer
// visible devices), which it logs naming the region and the version.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "core/registry.h"
#include "format/container.h"
#include "gpu/device_access.h"

namespace resurgo {

// Fills in the device of each managed region of `header`, as `access`
// reports it (region i of `regions` is region i of the header).
void record_residence(format::Header& header, const std::vector<Region>& regions, const gpu::DeviceAccess& access);

// What the version a restart read records of its managed regions.
class RecordedDevices {
 public:
  // Nothing recorded: every managed region goes to the store's device.
  RecordedDevices() = default;
  // The records of `table`, the region table of `version` as read.
  RecordedDevices(int version, const std::vector<format::RegionEntry>& table);

  // The device `region` is prefetched to, none to leave it where it is
  // (recorded on the host): its recorded ordinal when below
  // `device_count`, else `store_device` (logged on `log` when an ordinal
  // was out of range).
  std::optional<int> target(const Region& region, int store_device, int device_count, const Logger& log) const;

 private:
  int version_ = -1;
  std::map<std::string, int> by_label_;  // recorded ordinals and kDeviceHost
};

}  // namespace resurgo
