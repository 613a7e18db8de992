// Whether restart could read a version back, judged from headers and
// indexes alone: what latest() promises (include/resurgo/resurgo.hpp,
// Store::latest). No chunk is read: a full check would read every byte of every
// version at every program start. restart verifies each chunk as it reads
// it and falls back past a version whose chunk fails (RestartReport::skipped
// says so), the one case where it restores an older version than latest().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/store_id.h"
#include "tier/level.h"

namespace resurgo {

// Whose copies restart reads: the store's, for one rank (any store's with
// `accept_foreign`, restart.accept_foreign).
struct CopyOwner {
  const std::string& store;
  const format::StoreId& id;
  int rank;
  bool accept_foreign = false;
};

// Empty when one of `levels` holds a copy of `version` whose header and
// index pass their checks and name `owner`'s store, the version and the
// rank (with `checksum`: whose header+index checksum is that one, a job
// manifest's), and, for a delta, whose base is such a copy too, down to a
// full version, each with the delta's region table. Else why not, for
// messages ("its base 3: it is missing from every level"). An unreadable
// copy counts as not restorable: nothing is thrown.
std::string restore_problem(const std::vector<Level*>& levels, const CopyOwner& owner, int version,
                            std::optional<std::uint64_t> checksum = std::nullopt);

// Sets aside this rank's copies of the versions newer than `version` on
// `levels`: each is quarantined (Level::quarantine: renamed *.damaged, kept
// for inspection, never restored), so that the next checkpoints may take
// their numbers. An MPI job's restart(kLatest) does it once every rank
// restored `version` (CollectiveJob::clear_newer). Returns them, ascending.
std::vector<int> set_aside_newer(const std::vector<Level*>& levels, int version);

}  // namespace resurgo
