// Restore: reads a version back into the protected regions from its chain
// (the version, its base, and so on down to a full version), newest link
// first, each link from the fastest level holding an intact copy, verifying
// every chunk read and reading no chunk that newer links hold whole. A damaged
// copy is repaired from an intact one on another level, or quarantined when
// restart falls back past it. And the store's other reads of its levels:
// describe, the list of versions, whether a version is held.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/log.h"
#include "core/catalog.h"
#include "core/registry.h"
#include "format/container.h"
#include "format/extent.h"
#include "base/trace.h"
#include "base/thread_pool.h"
#include "resurgo/resurgo.hpp"
#include "tier/level.h"

namespace resurgo {

// Whose versions a restore reads: the store's, unless foreign ones are
// accepted (restart.accept_foreign).
struct StoreIdentity {
  const std::string& name;
  const format::StoreId& id;
  bool accept_foreign = false;

  // Throws what is wrong with the header of `container` (read from `path`)
  // for `version` of `rank`: another store, version or rank.
  void check(const format::Container& container, const std::string& path, int version, int rank) const;
};

struct RestoreContext {
  const StoreIdentity& store;
  int rank;
  const std::vector<Level*>& levels;  // fastest first
  const Registry& registry;
  ThreadPool& pool;
  const Logger& log;
  Trace& trace;
  RestartScope scope = RestartScope::kExactRegions;
  // When given, receives the region table of the version restored (its
  // newest link's): what it records of its regions (RegionEntry::device).
  std::vector<format::RegionEntry>* table = nullptr;
};

// Restores `version` (kLatest: the newest one whose whole chain is intact,
// falling back past broken chains) into the registered regions; fills
// `report` and `metadata` (the newest link's); returns the version restored.
// For one requested version, a chain broken by damage is a CorruptionError and
// one whose base is missing a NotFoundError; a copy that cannot be read
// anywhere is a StorageError either way (no roll-back past bytes that may be
// intact).
int restore_version(const RestoreContext& context, int version, RestartReport& report,
                    std::vector<std::byte>& metadata);

// Restores full `version` of host regions from where its capture put its
// bytes (`extents`, `header` its region table) while its first level still
// writes it (pipeline/in_flight.h), checking the regions as for a copy on
// a level; the report names L1, the buffer's level (a version is at L1
// once captured: Catalog). No checksum covers those bytes yet: they are
// the capture's own copy of the regions, as the level's writer reads them.
void restore_in_flight(const RestoreContext& context, int version, const format::Header& header,
                       const std::vector<Extent>& extents, RestartReport& report);

// The regions and metadata of `version` of store `store`, rank `rank`,
// from the header of its first intact copy on `levels`. NotFoundError when
// none holds it, CorruptionError when every copy is damaged.
VersionDescription describe_version(const std::vector<Level*>& levels, const StoreIdentity& store, int rank,
                                    int version);

// The versions on `levels` and those the catalog still has work for, with
// the levels holding each; discarded ones left out.
std::vector<VersionInfo> list_versions(const std::vector<Level*>& levels, Catalog& catalog);

// NotFoundError (naming where it looked) unless `version` of `store` is on
// one of `levels` or still on its way; `call` names the caller.
void check_held(const std::vector<Level*>& levels, Catalog& catalog, const std::string& store, int version,
                const char* call);

}  // namespace resurgo
