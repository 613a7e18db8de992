// Capture: how the application's bytes are taken at checkpoint() (DESIGN.md,
// "Data flow and modules"). It runs on the application thread and turns the
// protected regions into a Snapshot: where the bytes of each region are for
// the writer, and a hook that gives that memory back once written. A capture
// whose version is written by another process (fork) hands over a waiter
// instead. Implementations: copy into the host staging buffer (with a
// synchronous path for states larger than the buffer), fork, auto (copy or
// fork chosen per region from its measured write rate,
// capture/auto_capture.h) and delta (copy of the blocks written since the
// previous version, found by a Tracker).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "capture/snapshot.h"
#include "base/log.h"
#include "core/registry.h"
#include "resurgo/config.hpp"
#include "resurgo/device_stats.hpp"
#include "tier/device_level.h"
#include "tier/level.h"

namespace resurgo {

class MemoryLevel;
class ThreadPool;

// Extents covering every region whole, read from the application's memory.
std::vector<Extent> whole_regions(const std::vector<Region>& regions);

// Services a capture may use, owned by the Store.
struct CaptureContext {
  const Config& config;
  ThreadPool& pool;
  const Logger& log;
  // Called with true before the application's memory is copied and false
  // after: evictions never compete with a capture.
  std::function<void(bool)> capturing;
  // The route's L0, where device regions go; null without one.
  DeviceLevel* device_level = nullptr;
  // The route's L1, whose pieces the device capture pins (null: none).
  MemoryLevel* memory_level = nullptr;
};

// Where a restart writes the protected regions: into their memory, or (the
// device capture) into host copies of device regions that write_back()
// then moves to the device once the version was read and verified, so that
// a failed restart leaves them as they were.
class RestartTargets {
 public:
  virtual ~RestartTargets() = default;
  virtual const Registry& registry() const = 0;
  // The region table of `version`, the version a restart read from the
  // levels (its newest link's), given before write_back(); not given when
  // the regions were filled from elsewhere. The device capture takes from
  // it the device that held each managed region.
  virtual void read_table(int /*version*/, const std::vector<format::RegionEntry>& /*table*/) {}
  // Returns the bytes copied from L0, device to device.
  virtual std::uint64_t write_back() = 0;
};

class Capture {
 public:
  virtual ~Capture() = default;

  // The mode a checkpoint of `state_bytes` would use: "copy",
  // "synchronous", "fork" or (auto) "copy+fork" (what the stats report).
  virtual const char* mode(std::uint64_t state_bytes) const = 0;
  // The protected set changed to `state_bytes` in all; called on the
  // application thread between captures.
  virtual void resize(std::uint64_t state_bytes) = 0;
  // Takes `regions` as the version described by `header`. `first_level` is
  // the first level of the version's route (a forked child writes it).
  virtual Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                        CaptureTimes& times) = 0;
  // A restart is about to write into the protected regions (and needs the
  // memory bandwidth): background preparation pauses until `false`.
  virtual void restarting(bool) {}
  // Region `id` is no longer protected; its memory may be freed right after.
  virtual void unprotected(int /*id*/) {}
  // The next version must not depend on earlier ones: it goes to a level
  // that does not hold them, an earlier version failed, or a restart
  // rewrote the regions; `why` says which, for the log. Only the delta
  // capture keeps chains.
  virtual void start_new_chain(const std::string& /*why*/) {}

  // protect(): refuses (InvalidArgumentError naming `region` of `store`) a
  // region this capture cannot take, or whose pointer is not the memory
  // its call says; may settle the region's kind (host memory that is CUDA
  // managed memory becomes a managed region).
  virtual void check(Region& /*region*/, const std::string& /*store*/) {}
  // restart(): where to write the regions of `registry` when restoring
  // `version` (kLatest when not known yet).
  virtual std::unique_ptr<RestartTargets> restart_targets(const Registry& registry, int version);
  // The device regions' caches (none without device regions).
  virtual DeviceStats device_stats() const { return {}; }
  // The CUDA streams whose work later checkpoints wait for before they copy
  // managed regions (Store::set_capture_streams); none: the whole context.
  // Only a capture that takes managed regions has a use for them.
  virtual void set_capture_streams(std::vector<void*> /*streams*/) {}
};

// The capture `config.capture.mode` names, for host and managed regions,
// inside the device capture that takes device regions
// (capture/device_capture.h).
std::unique_ptr<Capture> make_capture(const CaptureContext& context);

// What a checkpoint's capture reports (VersionStats' capture part): of a
// state of `state_bytes` taken in `mode` (Capture::mode).
VersionStats capture_stats(const Snapshot& snapshot, const CaptureTimes& times, std::uint64_t state_bytes,
                           const char* mode);

// Default staging buffer capacity for `state_bytes` of protected state:
// twice the state (one version captured while the previous one is written)
// and at least kSmallStateBuffer (config.hpp), bounded by a quarter of the
// node's physical memory.
std::uint64_t default_buffer_capacity(std::uint64_t state_bytes);

}  // namespace resurgo
