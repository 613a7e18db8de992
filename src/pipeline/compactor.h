// Compaction (docs/tracking.md, "Compaction"): a delta version whose chain
// on a level has grown long is rewritten there as a full version, with the
// same number, bytes, regions and metadata, so that restart reads one file
// instead of the chain. The rewrite is an ordinary commit (temporary, sync,
// rename over the delta): a crash leaves the delta or the full version,
// never neither. The Scheduler runs it on its eviction thread, off the
// application's path; the old links are then the level's eviction's to drop.
#pragma once

#include <cstdint>

#include "pipeline/pacer.h"
#include "resurgo/config.hpp"
#include "tier/level.h"

namespace resurgo {

// Whether compaction applies to `level`: files that outlive the process and
// that this rank alone commits (L2, L4). A memory level holds few versions
// and loses them with the process; a collective level's version is complete
// only with every rank's copy, which one rank must not rewrite alone.
bool compactable(const Level& level);

struct Compaction {
  int deltas = 0;         // in the chain on the level before compaction
  bool full = false;      // the version is a full version on the level now
  bool rewritten = false;  // compaction committed it (else it was full already, or its chain short enough)
  std::uint64_t stored_bytes = 0;  // of the full version written
};

// Rewrites `version` on `level` as a full version when its chain there holds
// more than `compact_after` deltas. The chain is merged one output chunk
// (pipeline.chunk_size) at a time, as it is written (format/chain_merge.h):
// a compaction holds a few chunks, never the whole state. `known_bases`
// counts the chain without reading files where it can. All of the work runs
// on the calling thread (the Scheduler lowers its priority), none on the
// pipeline's workers, paced by `pacer` (one per compaction). Throws Error
// when a link cannot be read or the commit fails: the delta is then as it
// was.
Compaction compact_version(Level& level, int version, int compact_after, Pacer& pacer, const KnownBases& known_bases,
                           const Config::Pipeline& pipeline);

}  // namespace resurgo
