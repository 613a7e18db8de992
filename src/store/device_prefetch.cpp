#include "store/device_prefetch.h"

#include <sys/mman.h>

#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "base/units.h"
#include "capture/device_regions.h"
#include "gpu/device_access.h"
#include "resurgo/errors.hpp"

namespace resurgo {
namespace {

// The device regions of a version as L0 lays them (device and managed
// ones, as the device capture does: copied_by_dma): what a restart must
// protect for the bytes there to be its regions.
struct DeviceRegionShape {
  int id;
  std::string label;
  std::uint64_t bytes;
  bool operator==(const DeviceRegionShape&) const = default;
};
using DeviceLayout = std::vector<DeviceRegionShape>;

DeviceLayout layout_of(const std::vector<Region>& regions) {
  DeviceLayout layout;
  for (const Region& region : regions) {
    if (copied_by_dma(region.kind)) layout.push_back({region.id, region.label, region.bytes});
  }
  return layout;
}

std::uint64_t bytes_of(const DeviceLayout& layout) {
  std::uint64_t bytes = 0;
  for (const DeviceRegionShape& shape : layout) bytes += shape.bytes;
  return bytes;
}

// Host memory for the device regions of one version, pinned once with the
// store's backend (cuMemHostRegister; mlock for the host backend) so that
// the copies into L0 run at full bandwidth and asynchronously. Grown, and
// pinned again, only for a larger version. A pin that fails leaves it
// pageable: the copies are then slower, not wrong (logged once).
class PinnedStaging {
 public:
  PinnedStaging(DeviceBackend backend, int device, const Logger& log) : log_(log) {
    try {
      pinner_ = gpu::open_host_pinner(backend, device);
    } catch (const Error& error) {
      log_.warn(std::string("device prefetch: staging buffer not pinned: ") + error.what());
    }
  }
  ~PinnedStaging() { release(); }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  std::byte* get(std::size_t bytes) {
    if (bytes <= capacity_) return data_;
    release();
    void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      throw StorageError("device prefetch: cannot map " + size_text(bytes) + " of staging memory");
    }
    data_ = static_cast<std::byte*>(memory);
    capacity_ = bytes;
    pin();
    return data_;
  }

 private:
  void pin() {
    if (!pinner_) return;
    const std::size_t piece = gpu::pin_piece(*pinner_);
    try {
      for (std::size_t offset = 0; offset < capacity_; offset += piece) {
        const std::size_t bytes = std::min(piece, capacity_ - offset);
        pinner_->pin(data_ + offset, bytes);
        pinned_.emplace_back(data_ + offset, bytes);
      }
    } catch (const Error& error) {
      unpin();
      if (!warned_) log_.warn(std::string("device prefetch: staging buffer not pinned: ") + error.what());
      warned_ = true;
    }
  }
  void unpin() {
    for (const auto& [data, bytes] : pinned_) pinner_->unpin(data, bytes);
    pinned_.clear();
  }
  void release() {
    if (data_ == nullptr) return;
    unpin();
    ::munmap(data_, capacity_);
    data_ = nullptr;
    capacity_ = 0;
  }

  const Logger& log_;
  std::unique_ptr<gpu::HostPinner> pinner_;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<std::pair<std::byte*, std::size_t>> pinned_;
  bool warned_ = false;
};

// A restart of a staged version: restore reads its other regions (the
// device ones are marked restored elsewhere), and write_back() then copies
// the device ones from L0, device to device. Like the device capture's
// restart, the device regions change only once the rest was read and
// verified.
class L0Restart final : public RestartTargets {
 public:
  // `version` is held in L0 already (DeviceLevel::hold); the destructor
  // lets it go.
  L0Restart(DeviceLevel& l0, const Registry& registry, int version) : l0_(l0), version_(version) {
    for (Region region : registry.regions()) {
      if (copied_by_dma(region.kind)) {
        device_.push_back(region);
        region.restored_elsewhere = true;
      }
      targets_.add(std::move(region));
    }
  }
  ~L0Restart() override { l0_.unhold(version_); }
  L0Restart(const L0Restart&) = delete;
  L0Restart& operator=(const L0Restart&) = delete;
  const Registry& registry() const override { return targets_; }
  std::uint64_t write_back() override {
    std::uint64_t offset = 0;
    for (const Region& region : device_) {
      l0_.read(version_, offset, region.data, region.bytes);
      offset += region.bytes;
    }
    l0_.count_prefetch_restore();
    return offset;
  }

 private:
  DeviceLevel& l0_;
  const int version_;
  Registry targets_;
  std::vector<Region> device_;
};

class DevicePrefetch final : public DeviceStage {
 public:
  explicit DevicePrefetch(const DevicePrefetchParts& parts)
      : parts_(parts),
        l0_(*parts.route.device()),
        read_log_(parts.identity.name, quieter(parts.log)),
        staging_(parts.backend, l0_.device(), parts.log) {}

  void take_regions() override {
    std::lock_guard lock(mutex_);
    regions_ = parts_.registry.regions();
    regions_taken_++;
  }

  Outcome stage(int version) override {
    std::vector<Region> regions;
    std::uint64_t taken = 0;
    {
      std::lock_guard lock(mutex_);
      regions = regions_;
      taken = regions_taken_;
    }
    const DeviceLayout layout = layout_of(regions);
    const std::uint64_t bytes = bytes_of(layout);
    if (bytes == 0 || l0_.holds(version)) return Outcome::kDone;  // no device regions, or L0 holds it already
    if (!l0_.admit_prefetch(bytes)) {
      too_large(version, bytes);
      return Outcome::kDone;
    }
    std::byte* host = staging_.get(bytes);
    const Staged read{version, taken};
    if (!in_staging_ || *in_staging_ != read) {
      in_staging_.reset();
      read_from_ = read_device_regions(version, regions, host);
      in_staging_ = read;
    }
    const gpu::CaptureResult result = l0_.stage(version, {{host, bytes}});
    if (result.status == gpu::CaptureResult::Status::kNoRoom) return Outcome::kNoRoom;  // read again only if changed
    in_staging_.reset();
    if (result.status == gpu::CaptureResult::Status::kTooLarge) too_large(version, bytes);
    if (result.status != gpu::CaptureResult::Status::kCached) return Outcome::kDone;
    std::lock_guard lock(mutex_);
    staged_[version] = layout;
    parts_.log.debug("version " + std::to_string(version) + ": " + size_text(bytes) +
                     " of device regions prefetched from L" + std::to_string(read_from_) + " into " + l0_.where());
    return Outcome::kDone;
  }

  void restored(int version) override {
    if (forget(version)) l0_.consumed(version);
  }

  void discarded(int version) override {
    forget(version);
    l0_.discard(version);
  }

  std::unique_ptr<RestartTargets> restart_targets(const Registry& registry, int version) override {
    std::lock_guard lock(mutex_);
    const auto found = staged_.find(version);
    if (found == staged_.end() || found->second != layout_of(registry.regions()) || !l0_.hold(version)) {
      return nullptr;
    }
    return std::make_unique<L0Restart>(l0_, registry, version);
  }

 private:
  // Reads the device regions of `version` into `host`, end to end, from
  // the fastest level holding an intact copy; returns that level.
  int read_device_regions(int version, const std::vector<Region>& regions, std::byte* host) {
    Registry targets;
    std::uint64_t offset = 0;
    for (Region region : regions) {
      if (copied_by_dma(region.kind)) {
        region.data = host + offset;
        offset += region.bytes;
      } else {
        region.restored_elsewhere = true;
      }
      targets.add(std::move(region));
    }
    const std::vector<Level*> levels = parts_.route.readable();
    const RestoreContext context{parts_.identity, parts_.rank,  levels,       targets,
                                 parts_.pool,     read_log_,    parts_.trace, RestartScope::kProtectedRegions};
    RestartReport report;
    std::vector<std::byte> metadata;
    restore_version(context, version, report, metadata);
    return report.level;
  }

  void too_large(int version, std::uint64_t bytes) {
    parts_.log.info("version " + std::to_string(version) + ": its device regions (" + size_text(bytes) +
                    ") do not fit in " + l0_.where() + "; its restart copies them from host memory");
  }

  // Whether `version` was staged and not restored or discarded yet.
  bool forget(int version) {
    std::lock_guard lock(mutex_);
    return staged_.erase(version) != 0;
  }

  // The reads of restore log what restart did ("restarted from version
  // 6"): only their warnings concern a prefetch.
  static LogLevel quieter(const Logger& log) {
    if (log.enabled(LogLevel::kWarn)) return LogLevel::kWarn;
    return log.enabled(LogLevel::kError) ? LogLevel::kError : LogLevel::kOff;
  }

  const DevicePrefetchParts parts_;
  DeviceLevel& l0_;
  const Logger read_log_;
  // The version whose device regions the staging buffer holds, with the
  // regions taken then: one that found no room is not read again.
  struct Staged {
    int version;
    std::uint64_t regions_taken;
    bool operator==(const Staged&) const = default;
  };
  PinnedStaging staging_;  // these three: the prefetch thread's only
  std::optional<Staged> in_staging_;
  int read_from_ = -1;  // the level it was read from
  std::mutex mutex_;       // the two below
  std::vector<Region> regions_;
  std::uint64_t regions_taken_ = 0;  // take_regions() calls
  std::map<int, DeviceLayout> staged_;  // in L0, not restored or discarded yet
};

}  // namespace

std::unique_ptr<DeviceStage> device_prefetch(const DevicePrefetchParts& parts) {
  if (parts.route.device() == nullptr) return nullptr;
  return std::make_unique<DevicePrefetch>(parts);
}

}  // namespace resurgo
