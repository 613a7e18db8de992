// The L0 stage of a prefetch (pipeline/prefetcher.h; docs/adjoint.md,
// "Backward pass on the device"; HiPC'22 cache-allocation paper, the
// backward pass of section V). On the prefetch thread it reads the device
// regions of a version from the fastest level holding it (host memory, once
// the prefetcher brought the version there) into a pinned host buffer, and
// copies them into the L0 device cache on the cache's own stream, so that
// the copy overlaps the application's kernels; they lie there as a capture
// lays them, end to end. A restart of the version then copies them device
// to device, and reads its other regions from the levels as usual.
//
// A staged version stays in L0 until its last restore in the order
// (evictable from then on) or its discard (freed at once). One whose device
// regions exceed L0 is logged, counted, and restored from host memory.
#pragma once

#include <memory>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "core/registry.h"
#include "pipeline/prefetcher.h"
#include "resurgo/config.hpp"
#include "store/restore.h"
#include "tier/route.h"

namespace resurgo {

// What the stage reads and writes; all of it outlives the store's prefetcher.
struct DevicePrefetchParts {
  StoreIdentity identity;
  int rank;
  Route& route;              // its L0 (device()), and the levels a version is read from
  const Registry& registry;  // read on the application thread only
  DeviceBackend backend;     // whose pinner pins the staging buffer
  ThreadPool& pool;
  const Logger& log;
  Trace& trace;
};

// The stage into the route's L0; null when the route has none.
std::unique_ptr<DeviceStage> device_prefetch(const DevicePrefetchParts& parts);

}  // namespace resurgo
