// One file per version on L4 (persistent.layout = shared; docs/mpi.md, "One
// file per version"): every rank's container of a version becomes its part
// of the version's shared file (format/shared_file.h) before the job
// manifest is written, and is written once where it can be:
// - at the agreement on a version routed to L4, the ranks reserve a slot
//   each in the version's shared temporary (rank 0 creates it; slot sizes
//   bound the containers by their regions' bytes, offsets are their
//   exclusive prefix sum, holes stay sparse) and the level's commit writes
//   the rank's container straight into its slot (tier/shared_slots.h);
// - once every rank's commit settled, the parts stay in their slots when
//   every rank's commit filled its own; otherwise (a container larger than
//   its slot, a forked writer, a rank whose commit did not wait for its
//   slot) the ranks agree on offsets packed end to end in a new temporary
//   and each copies its part there, from its slot or its own file (written
//   as scratch, never synced: DirectoryLevel::set_shared_layout).
// Each rank syncs its part, rank 0 appends the part index (after the last
// slot or part) and publishes the file (rename, directory sync) only once
// every rank's part is durable. The commit protocol is otherwise the job's:
// the manifest, written after, makes the version complete, and each rank's
// own file, if any, is removed then, so a crash at any step leaves the
// version complete in the shared file or not a version of the job.
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

// The room reserved for a container whose regions hold `region_bytes`.
std::uint64_t slot_capacity(std::uint64_t region_bytes);

// Collective over `job` at the agreement on `version` (routed to L4), where
// `agreed` is the same on every rank: reserves this rank's slot of
// `region_bytes` (its regions' bytes) in a new shared temporary and hands
// it to `level`'s commit. Without the agreement it takes no collective
// step and the commit gets no slot.
void reserve_shared_slots(int version, bool agreed, std::uint64_t region_bytes, DirectoryLevel& level, Comm& job,
                          const Logger& log, double timeout_seconds);

// `version` failed at L4 before its shared file was written: its slot is
// forgotten, and rank 0 removes its temporary.
void abandon_shared_slot(int version, DirectoryLevel& level, int rank);

// Collective over `job`: makes every rank's committed part of `version` at
// `level` (in its slot, or its own file) its part of the version's shared
// file. True on every rank once it is
// published; false on every rank when any rank failed (that rank logs why,
// naming itself, the version and the file), and then nothing is published.
bool write_shared_version(int version, DirectoryLevel& level, Comm& job, const Logger& log, double timeout_seconds);

}  // namespace resurgo
