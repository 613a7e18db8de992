#include "capture/device_regions.h"

#include <algorithm>

#include "base/clock.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

const char* name_of(MemoryKind kind) {
  return kind == MemoryKind::kDevice ? "device memory" : kind == MemoryKind::kManaged ? "managed memory" : "host memory";
}

const char* call_for(MemoryKind kind) {
  return kind == MemoryKind::kDevice    ? "protect_device (rsg_protect_device)"
         : kind == MemoryKind::kManaged ? "protect_managed (rsg_protect_managed)"
                                        : "protect (rsg_protect)";
}

}  // namespace

void refuse_memory_kind(const Region& region, const std::string& store, MemoryKind found) {
  throw InvalidArgumentError("cannot protect region '" + region.label + "' of store '" + store + "' as " +
                             name_of(region.kind) + ": its pointer is " + name_of(found) + "; use " +
                             call_for(found));
}

// The host copy of one version's device regions, and its place in L0.
struct DeviceRegions::Staging {
  std::shared_ptr<DeviceStaging> buffer;        // outlives `block`
  std::unique_ptr<DeviceStaging::Block> block;  // the host copy, once staged
  std::uint64_t bytes = 0;
  double compute_seconds = 0;  // since the previous capture of device regions
  DeviceLevel* l0 = nullptr;  // null when the version bypassed L0
  std::int64_t version = -1;
  bool released = false;

  // The version is in host memory (or given up): L0 may evict it.
  void release_l0() {
    if (l0 == nullptr || released) return;
    released = true;
    l0->release(static_cast<int>(version));
  }
};

DeviceRegions::DeviceRegions(const Config& config, DeviceLevel* l0, int device, const Logger& log, MemoryLevel* l1)
    : config_(config),
      log_(log),
      l0_(l0),
      l1_(l1),
      device_(device),
      access_(gpu::open_device_access(config.device.backend, device)) {
  log_.info("device regions through " + access_->name() +
            (l0_ ? ", L0 device cache on " + l0_->memory_name() : std::string(", no L0 device cache")));
  if (l1_ && config.device.backend == DeviceBackend::kCuda) {
    pin_memory_level(*l1_, gpu::open_host_pinner(config.device.backend, device_), log_);
  }
}

DeviceRegions::~DeviceRegions() = default;

int DeviceRegions::device_of(const Config& config, const DeviceLevel* l0, const Region& region) {
  return l0 != nullptr ? l0->device() : gpu::store_device(config.device, region.data);
}

void DeviceRegions::check(const Region& region, const std::string& store) const {
  if (region.data == nullptr) return;
  const std::optional<gpu::PointerInfo> info = access_->describe(region.data);
  if (!info) return;
  if (info->kind != region.kind) refuse_memory_kind(region, store, info->kind);
  if (region.kind == MemoryKind::kDevice && info->device >= 0 && info->device != device_) {
    throw InvalidArgumentError("cannot protect device region '" + region.label + "' of store '" + store +
                               "': it is on device " + std::to_string(info->device) + ", and the store's device "
                               "regions and L0 cache are on device " + std::to_string(device_) +
                               " (device.ordinal, or for \"auto\" the device current when the store was opened "
                               "or of its first device region); a store uses one device: open one store per device");
  }
}

Snapshot DeviceRegions::take(Capture& host_capture, const std::vector<Region>& regions, format::Header header,
                             Level& first_level, CaptureTimes& times) {
  record_residence(header, regions, *access_);
  if (auto* fork = dynamic_cast<ForkCapture*>(&host_capture)) {
    return drain_then_fork(*fork, regions, std::move(header), first_level, times);
  }
  std::vector<Region> host;
  std::vector<std::uint32_t> header_index;  // of each host region
  for (std::size_t index = 0; index < regions.size(); ++index) {
    if (copied_by_dma(regions[index].kind)) continue;
    host.push_back(regions[index]);
    header_index.push_back(static_cast<std::uint32_t>(index));
  }
  Snapshot snapshot;
  if (host.empty()) {
    snapshot.header = std::move(header);
  } else {
    snapshot = host_capture.take(host, std::move(header), first_level, times);
  }
  for (Extent& extent : snapshot.extents) extent.region = header_index[extent.region];
  try {
    take_device_regions(regions, snapshot, times);
  } catch (...) {
    if (snapshot.release) snapshot.release();  // the host regions' buffer space
    throw;
  }
  return snapshot;
}

std::vector<const Region*> DeviceRegions::dma_regions(const std::vector<Region>& regions) {
  std::vector<const Region*> device;
  for (const Region& region : regions) {
    if (copied_by_dma(region.kind)) device.push_back(&region);
  }
  return device;
}

void DeviceRegions::synchronize_for(const std::vector<const Region*>& device) {
  const auto managed = [](const Region* region) { return region->kind == MemoryKind::kManaged; };
  if (std::any_of(device.begin(), device.end(), managed)) access_->synchronize(capture_streams_);
}

// The parent's part of a forked checkpoint of GPU state: it waits for a
// free half of the fork staging (backpressure), drains into it (a failed
// copy or synchronisation fails this checkpoint alone), and forks. The half
// is released once the child's version is settled.
Snapshot DeviceRegions::drain_then_fork(ForkCapture& fork, const std::vector<Region>& regions, format::Header header,
                                        Level& first_level, CaptureTimes& times) {
  const std::vector<const Region*> device = dma_regions(regions);
  std::uint64_t bytes = 0;
  for (const Region* region : device) bytes += region->bytes;
  if (!fork_staging_) {
    fork_staging_ = std::make_shared<ForkStaging>(gpu::open_host_pinner(config_.device.backend, device_), log_);
  }
  const ForkStaging::Half half = fork_staging_->acquire(bytes, times);
  const auto release = [staging = fork_staging_, index = half.index] { staging->release(index); };
  Snapshot snapshot;
  snapshot.header = std::move(header);
  std::vector<Region> host;
  try {
    const Clock::time_point started = Clock::now();
    synchronize_for(device);
    gpu::for_each_pin_piece(0, bytes, fork_staging_->piece(), [&](std::uint64_t offset, std::uint64_t length) {
      copy_to_host(device, offset, half.data + offset, length);
    });
    times.copy_seconds += seconds_since(started);
    times.device_bytes = bytes;
    std::uint64_t offset = 0;
    for (std::uint32_t index = 0; index < regions.size(); ++index) {
      const Region& region = regions[index];
      const bool drained = copied_by_dma(region.kind);
      if (!drained) host.push_back(region);
      if (region.bytes == 0) continue;
      snapshot.extents.push_back(Extent{index, 0, region.bytes, drained ? half.data + offset : region.data});
      if (drained) offset += region.bytes;
    }
    snapshot.release = release;
    const ForkStaging::Sharing sharing(*fork_staging_, half.index);
    return fork.fork_writer(host, {}, std::move(snapshot), first_level, times);
  } catch (...) {
    release();
    throw;
  }
}

void DeviceRegions::take_device_regions(const std::vector<Region>& regions, Snapshot& snapshot, CaptureTimes& times) {
  const std::vector<const Region*> device = dma_regions(regions);
  if (device.empty()) return;
  std::uint64_t bytes = 0;
  for (const Region* region : device) bytes += region->bytes;
  const Clock::time_point started = Clock::now();
  synchronize_for(device);
  const double compute_seconds =
      previous_take_end_ ? std::chrono::duration<double>(started - *previous_take_end_).count() : 0;
  if (!staging_) {
    const std::uint64_t capacity =
        config_.buffer.capacity > 0 ? config_.buffer.capacity : default_buffer_capacity(bytes);
    staging_ = std::make_shared<DeviceStaging>(config_, capacity, gpu::open_host_pinner(config_.device.backend, device_),
                                               log_);
  }
  auto staging = std::make_shared<Staging>();
  staging->buffer = staging_;
  staging->bytes = bytes;
  staging->compute_seconds = compute_seconds;
  if (l0_) take_into_cache(snapshot.header.version, regions, device, snapshot, staging, times);
  if (staging->l0 == nullptr) take_to_host(device, *staging);
  times.copy_seconds += seconds_since(started);
  times.device_bytes = bytes;
  times.device_into_l0 = staging->l0 != nullptr;
  std::function<void()> release_host = std::move(snapshot.release);
  // On the first level's worker once the version is written: the staging
  // buffer's touch model decides for the flushes to come there, not on the
  // application's checkpoint path.
  snapshot.release = [release_host = std::move(release_host), staging] {
    if (release_host) release_host();
    staging->release_l0();  // a version whose staging never ran
    staging->block.reset();
    staging->buffer->checkpoint_taken(staging->bytes, staging->compute_seconds);
  };
  for (std::size_t index = 0, offset = 0; index < regions.size(); ++index) {
    if (!copied_by_dma(regions[index].kind)) continue;
    const std::byte* source = staging->block ? staging->block->data() + offset : nullptr;
    snapshot.extents.push_back(Extent{static_cast<std::uint32_t>(index), 0, regions[index].bytes, source});
    offset += regions[index].bytes;
  }
  previous_take_end_ = Clock::now();
  std::sort(snapshot.extents.begin(), snapshot.extents.end(), [](const Extent& a, const Extent& b) {
    return a.region != b.region ? a.region < b.region : a.offset < b.offset;
  });
}

// Device to device into L0; the stage hook brings the bytes to host memory
// on the worker. A version L0 cannot hold is left to take_to_host.
void DeviceRegions::take_into_cache(std::int64_t version, const std::vector<Region>& regions,
                                    const std::vector<const Region*>& device, Snapshot& snapshot,
                                    const std::shared_ptr<Staging>& staging, CaptureTimes& times) {
  std::vector<gpu::CaptureSpan> spans;
  for (const Region* region : device) spans.push_back({region->data, region->bytes});
  const int number = static_cast<int>(version);
  std::erase_if(cached_layouts_, [&](const auto& entry) { return !l0_->holds(static_cast<int>(entry.first)); });
  if (l0_->holds(number)) {
    // An older version of this number, taken before a restart fell back past
    // it: stale, so it bypasses L0 and restart no longer reads it there.
    cached_layouts_.erase(version);
    return;
  }
  const gpu::CaptureResult result = l0_->capture(number, spans);
  times.device_wait_seconds = result.map_wait_seconds + result.flush_wait_seconds;
  if (result.status != gpu::CaptureResult::Status::kCached) return;
  cached_layouts_[version] = device_layout(regions);
  staging->l0 = l0_;
  staging->version = version;
  snapshot.stage = [staging](std::vector<Extent>& extents) {
    try {
      staging->block = staging->buffer->stage(
          staging->bytes, [&](std::uint64_t offset, std::byte* target, std::uint64_t bytes) {
            staging->l0->read(static_cast<int>(staging->version), offset, target, bytes);
          });
    } catch (...) {
      staging->release_l0();
      throw;
    }
    staging->release_l0();
    std::uint64_t offset = 0;
    for (Extent& extent : extents) {
      if (extent.source != nullptr) continue;
      extent.source = staging->block->data() + offset;
      offset += extent.bytes;
    }
  };
}

void DeviceRegions::take_to_host(const std::vector<const Region*>& device, Staging& staging) {
  staging.block = staging.buffer->stage(staging.bytes, [&](std::uint64_t offset, std::byte* target,
                                                           std::uint64_t bytes) {
    copy_to_host(device, offset, target, bytes);
  });
}

void DeviceRegions::copy_to_host(const std::vector<const Region*>& device, std::uint64_t offset, std::byte* target,
                                 std::uint64_t bytes) {
  std::uint64_t region_start = 0;
  for (const Region* region : device) {
    const std::uint64_t begin = std::max(offset, region_start);
    const std::uint64_t end = std::min(offset + bytes, region_start + region->bytes);
    if (begin < end) {
      access_->to_host(target + (begin - offset), static_cast<const std::byte*>(region->data) + (begin - region_start),
                       end - begin);
    }
    region_start += region->bytes;
  }
}

DeviceRestart::DeviceRestart(const Registry& registry, DeviceRegions& device, int version)
    : capture_(device),
      protected_(registry),
      version_(version),
      from_cache_(version != kLatest && device.hold_cached(version, registry.regions())),
      from_l1_(version != kLatest && !from_cache_ ? device.open_in_l1(version, registry.regions()) : nullptr) {
  for (Region region : registry.regions()) {
    if (copied_by_dma(region.kind) && (from_cache_ || from_l1_)) {
      region.restored_elsewhere = true;
    } else if (copied_by_dma(region.kind)) {
      Copy& copy = copies_.emplace_back(Copy{region, std::make_unique_for_overwrite<std::byte[]>(region.bytes)});
      region.data = copy.host.get();
    }
    staged_.add(std::move(region));
  }
}

DeviceRestart::~DeviceRestart() {
  if (from_cache_) capture_.unhold(version_);
}

std::uint64_t DeviceRestart::write_back() {
  if (from_cache_) return capture_.restore_from_l0(version_, protected_.regions(), recorded_);
  if (from_l1_) capture_.write_back(*from_l1_, protected_.regions(), recorded_);
  for (const Copy& copy : copies_) capture_.write_back(copy.device, copy.host.get(), recorded_);
  return 0;
}

std::vector<DeviceRegions::CachedRegion> DeviceRegions::device_layout(const std::vector<Region>& regions) {
  std::vector<CachedRegion> layout;
  for (const Region& region : regions) {
    if (copied_by_dma(region.kind)) layout.push_back({region.id, region.label, region.bytes});
  }
  return layout;
}

bool DeviceRegions::cached(std::int64_t version, const std::vector<Region>& regions) const {
  const auto found = cached_layouts_.find(version);
  return l0_ && found != cached_layouts_.end() && l0_->holds(static_cast<int>(version)) &&
         found->second == device_layout(regions);
}

bool DeviceRegions::hold_cached(std::int64_t version, const std::vector<Region>& regions) {
  return cached(version, regions) && l0_->hold(static_cast<int>(version));
}

std::uint64_t DeviceRegions::restore_from_l0(std::int64_t version, const std::vector<Region>& regions,
                                             const RecordedDevices& recorded) {
  std::uint64_t offset = 0;
  for (const Region& region : regions) {
    if (!copied_by_dma(region.kind)) continue;
    l0_->read(static_cast<int>(version), offset, region.data, region.bytes);
    make_resident(region, recorded);
    offset += region.bytes;
  }
  return offset;
}

void DeviceRegions::write_back(const Region& region, const std::byte* host, const RecordedDevices& recorded) {
  access_->to_device(region.data, host, region.bytes);
  make_resident(region, recorded);
}

std::unique_ptr<InPlaceDeviceCopy> DeviceRegions::open_in_l1(int version, const std::vector<Region>& regions) {
  return l1_ ? InPlaceDeviceCopy::open(*l1_, version, regions) : nullptr;
}

void DeviceRegions::write_back(const InPlaceDeviceCopy& copy, const std::vector<Region>& regions,
                               const RecordedDevices& recorded) {
  copy.write_back(*access_);
  for (const Region& region : regions) make_resident(region, recorded);
}

// A managed region goes back to the device that held it when the version
// was taken, else to the store's device, where its kernels run (one store
// uses one device); one last put on the host stays there
// (device_residence.h). A refused prefetch costs page faults later, not
// bytes: the restart goes on, and says so.
void DeviceRegions::make_resident(const Region& region, const RecordedDevices& recorded) {
  if (region.kind != MemoryKind::kManaged || region.bytes == 0) return;
  const std::optional<int> target = recorded.target(region, device_, access_->device_count(), log_);
  if (!target) return;
  try {
    access_->prefetch_to_device(region.data, region.bytes, *target);
  } catch (const gpu::GpuError& error) {
    log_.warn("managed region '" + region.label + "' was restored but not prefetched to device " +
              std::to_string(*target) + ": " + error.what() + "; its pages move on first access instead");
  }
}

DeviceStats DeviceRegions::stats() const {
  DeviceStats stats;
  if (l0_) stats.cache = l0_->stats();
  if (staging_) stats.staging = staging_->stats();
  return stats;
}

}  // namespace resurgo
