// Restores a version of a single-region container (one host region "u" of
// store "s", as the memory level tests write them) from `level`, as a
// store's restart does: restore_version with a registry of that region.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "core/registry.h"
#include "format/container.h"
#include "store/restore.h"
#include "tier/level.h"

namespace resurgo::testing {

// Returns the version restored into `region` (restore_version's answer).
inline int restore_one_region(Level& level, const format::StoreId& id, int version, std::vector<std::byte>& region,
                              ThreadPool& pool, const Logger& log, Trace& trace) {
  Registry registry;
  Region protected_region;
  protected_region.label = "u";
  protected_region.data = region.data();
  protected_region.bytes = region.size();
  registry.add(protected_region);
  const std::string name = "s";
  const StoreIdentity store{name, id};
  const std::vector<Level*> levels{&level};
  const RestoreContext context{store, 0, levels, registry, pool, log, trace};
  RestartReport report;
  std::vector<std::byte> metadata;
  return restore_version(context, version, report, metadata);
}

}  // namespace resurgo::testing
