// One file per version on L4 (persistent.layout = shared; docs/mpi.md, "One
// file per version"): once every rank's container of a version is written
// on L4 (as scratch, never synced: DirectoryLevel::set_shared_layout), the
// ranks pack them into the version's shared file (format/shared_file.h)
// before the job manifest is written. A container's size is known only once
// the pipeline has written it, so it cannot go straight to its offset. The
// offsets are an exclusive prefix sum of the ranks' sizes, agreed over the
// job's Comm; each rank copies its container verbatim at its offset (its
// chunks keep their checksums) and syncs it, and rank 0 appends the part
// index and publishes the file (rename, directory sync) only once every
// rank's part is durable. The commit protocol is otherwise the job's: the
// manifest, written after, makes the version complete, and each rank's own
// file is removed then, so a crash at any step leaves the version complete
// in the shared file or not a version of the job.
#pragma once

#include <cstdint>
#include <vector>

#include "base/log.h"
#include "resurgo/comm.hpp"
#include "tier/directory_level.h"

namespace resurgo {

// Where each rank's part starts: the exclusive prefix sum of `sizes` (by
// rank). StateError when the total overflows.
std::vector<std::uint64_t> part_offsets(const std::vector<std::uint64_t>& sizes);

// Collective over `job`: packs every rank's committed file of `version` at
// `level` into the version's shared file. True on every rank once it is
// published; false on every rank when any rank failed (that rank logs why,
// naming itself, the version and the file), and then nothing is published.
bool write_shared_version(int version, DirectoryLevel& level, Comm& job, const Logger& log, double timeout_seconds);

}  // namespace resurgo
