#include "capture/capture.h"

#include <algorithm>

#include "base/units.h"
#include "capture/auto_capture.h"
#include "capture/copy_capture.h"
#include "capture/delta_capture.h"
#include "capture/device_capture.h"
#include "capture/fork_capture.h"

namespace resurgo {

std::vector<Extent> whole_regions(const std::vector<Region>& regions) {
  std::vector<Extent> extents;
  for (std::uint32_t r = 0; r < regions.size(); ++r) {
    if (regions[r].bytes > 0) extents.push_back({r, 0, regions[r].bytes, regions[r].data});
  }
  return extents;
}

VersionStats capture_stats(const Snapshot& snapshot, const CaptureTimes& times, std::uint64_t state_bytes,
                           const char* mode) {
  VersionStats captured;
  captured.bytes = state_bytes;
  captured.base_version = static_cast<int>(snapshot.header.base_version);
  const bool synchronous = snapshot.synchronous && !snapshot.into_memory_level;
  captured.capture = captured.base_version >= 0 ? "delta" : synchronous ? "synchronous" : mode;
  captured.captured_bytes = total_bytes(snapshot.extents);
  captured.dirty_bytes = snapshot.tracking.dirty_bytes;
  captured.granularity_bytes = snapshot.tracking.granularity_bytes;
  captured.tracker = snapshot.tracking.tracker;
  captured.backpressure_seconds = times.backpressure_seconds;
  captured.first_touch_seconds = times.first_touch_seconds;
  captured.copy_seconds = times.copy_seconds;
  captured.device_bytes = times.device_bytes;
  captured.device_path = times.device_bytes == 0 ? "" : times.device_into_l0 ? "l0" : "host";
  captured.device_wait_seconds = times.device_wait_seconds;
  return captured;
}

std::uint64_t default_buffer_capacity(std::uint64_t state_bytes) {
  const std::uint64_t quarter = quarter_of_physical_memory();
  const std::uint64_t wanted = std::max(2 * state_bytes, kSmallStateBuffer);
  return quarter > 0 ? std::min(wanted, quarter) : wanted;
}

namespace {

// The regions as they are: restore writes into their memory.
class InPlace final : public RestartTargets {
 public:
  explicit InPlace(const Registry& registry) : registry_(registry) {}
  const Registry& registry() const override { return registry_; }
  std::uint64_t write_back() override { return 0; }

 private:
  const Registry& registry_;
};

std::unique_ptr<Capture> make_host_capture(const CaptureContext& context) {
  switch (context.config.capture.mode) {
    case CaptureMode::kFork:
      return std::make_unique<ForkCapture>(context);
    case CaptureMode::kAuto:
      return std::make_unique<AutoCapture>(context);
    case CaptureMode::kDelta:
      return std::make_unique<DeltaCapture>(context);
    case CaptureMode::kCopy:
      break;
  }
  return std::make_unique<CopyCapture>(context);
}

}  // namespace

std::unique_ptr<RestartTargets> Capture::restart_targets(const Registry& registry, int) {
  return std::make_unique<InPlace>(registry);
}

std::unique_ptr<Capture> make_capture(const CaptureContext& context) {
  return std::make_unique<DeviceCapture>(make_host_capture(context), context);
}

}  // namespace resurgo
