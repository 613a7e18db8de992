// The hash tracker: XXH3 (64 bits) of every block of block_pages pages of a
// region, compared at each collect with the hashes of the previous one. It
// needs nothing from the kernel and works on any memory the CPU can read,
// whatever backs it; its cost is reading the whole region at every collect.
// The region must stay readable while watched.
//
// A block whose hash changed is reported as all of its pages. Block b holds
// the region's pages [b * block_pages, (b + 1) * block_pages), and only the
// region's own bytes of them are hashed.
//
// What it reports is a change of content, not a write:
// - A write that leaves a block's bytes as they were (the same value written
//   again, or a value changed and changed back) is not reported. That is
//   correct for a delta: the previous version already holds those bytes.
// - Two different contents of a block have the same 64-bit hash with
//   probability about 2^-64, so a changed block is missed with that
//   probability. Even a million changed blocks at each of a million
//   checkpoints gives about 5e-8 over the whole run, far below the rate of
//   undetected memory and storage errors the checkpoint already lives with.
//   Application data is not chosen to collide with XXH3; if it ever could be
//   (untrusted input stored verbatim), XXH3_128bits costs about the same.
#pragma once

#include <memory>

#include "track/tracker.h"

namespace resurgo::track {

// Never throws Unavailable.
std::unique_ptr<Tracker> make_hash_tracker();

}  // namespace resurgo::track
