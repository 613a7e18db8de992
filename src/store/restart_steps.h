// The restore steps a Store hands its Job at restart (job/job.h): read a
// version from this rank's levels, or let the job fill the regions from
// elsewhere (its redistribution onto another number of ranks), or copy a
// version its first level still writes from the capture's buffer. Either way
// the regions change only once the version was read and verified: device
// regions are filled through host copies first (Capture::restart_targets),
// or copied from L0 last when it holds the version (the device capture's,
// or staged there by the prefetch: store/device_prefetch.h).
#pragma once

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "capture/capture.h"
#include "core/registry.h"
#include "job/job.h"
#include "pipeline/prefetcher.h"
#include "pipeline/scheduler.h"
#include "store/restore.h"
#include "resurgo/resurgo.hpp"
#include "tier/route.h"

namespace resurgo {

// What a restart of an open store reads and writes; all of it outlives the
// steps made from it (the store is open while its job restarts).
struct RestartParts {
  StoreIdentity identity;  // whose versions it reads
  int rank;
  Route& route;
  Registry& registry;
  Capture& capture;
  Prefetcher& prefetcher;
  Scheduler& scheduler;
  ThreadPool& pool;
  const Logger& log;
  Trace& trace;
};

RestoreSteps restart_steps(const RestartParts& parts, RestartScope scope);

}  // namespace resurgo
