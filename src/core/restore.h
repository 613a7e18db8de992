// Restore: reads a version back into the protected regions, fastest level
// first, verifying every chunk. A damaged copy is repaired from an intact one
// on another level, or quarantined when restart falls back past it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/registry.h"
#include "core/trace.h"
#include "pipeline/thread_pool.h"
#include "resurgo/resurgo.hpp"
#include "tier/level.h"

namespace resurgo {

struct RestoreContext {
  const std::string& store;
  int rank;
  const std::vector<Level*>& levels;  // fastest first
  const Registry& registry;
  ThreadPool& pool;
  const Logger& log;
  Trace& trace;
};

// Committed versions of this rank, each with the levels holding a copy.
std::map<int, std::vector<int>> committed_versions(const std::vector<Level*>& levels);

// Restores `version` (kLatest: the newest intact one, falling back past
// damaged versions) into the registered regions; fills `report` and
// `metadata`; returns the version restored.
int restore_version(const RestoreContext& context, int version, RestartReport& report,
                    std::vector<std::byte>& metadata);

}  // namespace resurgo
