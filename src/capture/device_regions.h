// The device regions' part of a version (docs/gpu.md; HiPC'22 cache paper,
// section IV), for the device capture (device_capture.h). Managed regions
// go the same way (copied_by_dma below), once the device's context was
// synchronised. On the application thread, take() copies them device to
// device into L0 (the route's DeviceLevel) and returns; on the first
// level's worker, the Snapshot's `stage` copies them out of L0 into host
// memory for the writer and releases the version in L0, so that it may be
// evicted (first in, first out) once L0 is full. Without L0, or for a version L0 cannot hold,
// the regions are copied device to host before checkpoint() returns (the L0
// bypass, logged by the cache). Either way the host copy goes to the L1
// host buffer that pins late (device_staging.h), sized at the first
// capture: buffer.capacity, or twice that version.
//
// Under capture.mode = "fork" (CRUM's drain-then-fork, docs/gpu.md
// "Forked checkpoints of GPU state") L0 is bypassed: take() drains the
// device and managed regions into a half of the fork staging
// (device_staging.h) by the driver's copies, after synchronising, then
// forks the writer, which writes them from there and the host regions from
// its copy-on-write image, and never calls the driver. The parent returns
// once the child started and may launch GPU work at once: the version no
// longer reads device or managed memory.
//
// Once checkpoint() returned, the version no longer reads the application's
// device memory (L0 and the host copy are the store's own), so a device
// region may be freed right after unprotect().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "capture/capture.h"
#include "base/clock.h"
#include "capture/device_memory_level.h"
#include "capture/device_residence.h"
#include "capture/device_staging.h"
#include "capture/fork_capture.h"
#include "base/log.h"
#include "core/registry.h"
#include "gpu/device_access.h"
#include "resurgo/config.hpp"
#include "resurgo/device_stats.hpp"
#include "tier/device_level.h"

namespace resurgo {

// Whether regions of `kind` are taken here, by the driver's copies (DMA),
// rather than by the host capture: device memory, which the host cannot
// load, and managed memory, where host loads would fault each page back from
// the GPU one at a time, leave it migrated to the host, and see the
// kernels' writes only after a synchronisation (take() synchronises). Delta
// mode's write tracking sees host writes only: such a region is taken in
// full at every version.
inline bool copied_by_dma(MemoryKind kind) { return kind != MemoryKind::kHost; }

class DeviceRegions {
 public:
  // Opens the backend `config.device.backend` names on device `device`, the
  // device of `l0` when there is one (may be null). Throws GpuError when
  // the backend cannot be used (no driver, no such device), saying why.
  // With the CUDA backend, the pieces of `l1` (the route's memory level;
  // null: none) are pinned from now on (device_memory_level.h); the host
  // backend's copies are memcpy, which pinning would not speed up.
  DeviceRegions(const Config& config, DeviceLevel* l0, int device, const Logger& log, MemoryLevel* l1 = nullptr);
  ~DeviceRegions();
  DeviceRegions(const DeviceRegions&) = delete;
  DeviceRegions& operator=(const DeviceRegions&) = delete;

  // The device of a store's first device region `region`: L0's when the
  // store has one, else the device holding it, or (where the backend cannot
  // tell) the calling thread's current one.
  static int device_of(const Config& config, const DeviceLevel* l0, const Region& region);

  // Refuses (InvalidArgumentError naming `region` of store `store`) a
  // pointer that is not memory of the region's kind (device or managed), or
  // device memory of another device than this store's: one store uses one
  // device. Managed memory may be of any device (unified addressing).
  void check(const Region& region, const std::string& store) const;

  // The version `header` describes: the host regions of `regions` through
  // `host_capture`, the device and managed regions into L0 (or host
  // memory), after synchronising the device's context when there are
  // managed ones; or, when `host_capture` is a ForkCapture, all of them by
  // a forked writer once the device and managed regions were drained to
  // host memory. Region i of `regions` is region i of the header.
  Snapshot take(Capture& host_capture, const std::vector<Region>& regions, format::Header header,
                Level& first_level, CaptureTimes& times);

  // Whether L0 holds `version` with the device regions of `regions` (the
  // same ids, labels and sizes, in order), so that restart may copy them
  // from there, device to device. Application thread only, as take().
  bool cached(std::int64_t version, const std::vector<Region>& regions) const;
  // As cached(), and then keeps it in L0 until unhold(): a restart reads it
  // last, and the prefetch thread may make room in L0 meanwhile.
  bool hold_cached(std::int64_t version, const std::vector<Region>& regions);
  void unhold(std::int64_t version) { l0_->unhold(static_cast<int>(version)); }
  // Copies them from L0 into the regions; returns the bytes copied.
  std::uint64_t restore_from_l0(std::int64_t version, const std::vector<Region>& regions,
                                const RecordedDevices& recorded);
  // Copies host bytes back into a device or managed region; they are there
  // on return. Either restore then prefetches a managed region to the
  // device `recorded` says (make_resident).
  void write_back(const Region& region, const std::byte* host, const RecordedDevices& recorded);
  // The device and managed regions of `regions` for `version`, verified
  // where L1 holds them; null when it cannot give them (InPlaceDeviceCopy).
  std::unique_ptr<InPlaceDeviceCopy> open_in_l1(int version, const std::vector<Region>& regions);
  // Copies them into the regions (then make_resident, as write_back).
  void write_back(const InPlaceDeviceCopy& copy, const std::vector<Region>& regions, const RecordedDevices& recorded);

  // The L0 cache's counters and the staging buffer's, where they exist.
  // Application thread only, as take().
  DeviceStats stats() const;
  // The streams take() waits for when there are managed regions (none: the
  // whole context). Application thread only, as take().
  void set_capture_streams(std::vector<void*> streams) { capture_streams_ = std::move(streams); }

 private:
  struct Staging;
  struct CachedRegion {
    int id;
    std::string label;
    std::uint64_t bytes;
    bool operator==(const CachedRegion&) const = default;
  };
  static std::vector<CachedRegion> device_layout(const std::vector<Region>& regions);

  // The regions taken by the driver's copies, in order.
  static std::vector<const Region*> dma_regions(const std::vector<Region>& regions);
  void make_resident(const Region& region, const RecordedDevices& recorded);
  // Makes the kernels' writes to managed memory visible before a copy.
  void synchronize_for(const std::vector<const Region*>& device);
  Snapshot drain_then_fork(ForkCapture& fork, const std::vector<Region>& regions, format::Header header,
                           Level& first_level, CaptureTimes& times);
  void take_device_regions(const std::vector<Region>& regions, Snapshot& snapshot, CaptureTimes& times);
  // `device`: the device regions among `regions`.
  void take_into_cache(std::int64_t version, const std::vector<Region>& regions,
                       const std::vector<const Region*>& device, Snapshot& snapshot,
                       const std::shared_ptr<Staging>& staging, CaptureTimes& times);
  void take_to_host(const std::vector<const Region*>& device, Staging& staging);
  // Copies bytes [offset, offset + bytes) of the regions laid end to end to `target`.
  void copy_to_host(const std::vector<const Region*>& device, std::uint64_t offset, std::byte* target,
                    std::uint64_t bytes);

  const Config& config_;
  const Logger& log_;
  DeviceLevel* const l0_;  // null: none; the route's, which outlives the versions in flight
  MemoryLevel* const l1_;  // null: none; the route's
  const int device_;
  std::unique_ptr<gpu::DeviceAccess> access_;
  std::vector<void*> capture_streams_;  // CUstreams; none: the whole context
  std::shared_ptr<DeviceStaging> staging_;  // made at the first capture, sized for it; shared with versions in flight
  std::shared_ptr<ForkStaging> fork_staging_;  // capture.mode = "fork": made at the first capture; as staging_
  std::optional<Clock::time_point> previous_take_end_;  // the compute interval starts there
  // The device regions of each version L0 may still hold (pruned at take()).
  std::map<std::int64_t, std::vector<CachedRegion>> cached_layouts_;
};

// "cannot protect region 'u' of store 's' as device memory: its pointer is
// host memory; use protect (rsg_protect)": thrown as InvalidArgumentError.
[[noreturn]] void refuse_memory_kind(const Region& region, const std::string& store, MemoryKind found);

// Restart into device and managed regions ("device regions" below). When
// L0 still holds `version` with these device regions, restore reads only
// the other regions (registry() marks the device ones restored elsewhere)
// and write_back() copies them from L0, device to device. Else, when L1
// holds an intact copy of them, the same with write_back() copying them
// host to device straight out of L1's (pinned) pieces. Otherwise
// restore fills host copies of them, and write_back() copies those to
// device memory. Either way the device regions change only once the rest
// of the version was read and verified.
class DeviceRestart final : public RestartTargets {
 public:
  // `version`: kLatest never reads from L0 (the version is not known yet).
  DeviceRestart(const Registry& registry, DeviceRegions& device, int version);
  ~DeviceRestart() override;
  DeviceRestart(const DeviceRestart&) = delete;
  DeviceRestart& operator=(const DeviceRestart&) = delete;
  const Registry& registry() const override { return staged_; }
  // Where the managed regions go back to (device_residence.h).
  void read_table(int version, const std::vector<format::RegionEntry>& table) override {
    recorded_ = RecordedDevices(version, table);
  }
  // Returns the bytes copied from L0 (0 when from host copies).
  std::uint64_t write_back() override;

 private:
  struct Copy {
    Region device;
    std::unique_ptr<std::byte[]> host;
  };
  DeviceRegions& capture_;
  const Registry& protected_;
  const int version_;
  const bool from_cache_;
  const std::unique_ptr<InPlaceDeviceCopy> from_l1_;  // null: not from L1
  Registry staged_;
  std::vector<Copy> copies_;
  RecordedDevices recorded_;  // none until read_table()
};

}  // namespace resurgo
