// Restart on another number of ranks (issue 12): each rank of the new job
// fills every region it protects as a block of a global array (GlobalBlock)
// from the pieces of the old ranks' blocks it overlaps, read from the old
// ranks' files of one version in a directory every rank sees (L4). Only
// the chunks holding those pieces are read, each verified; the job manifest
// says where every old block lies and which file (by checksum) holds it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/registry.h"
#include "format/manifest.h"
#include "resurgo/env.hpp"
#include "tier/directory_level.h"

namespace resurgo {

// A piece of an old block that lands in a new one: bytes at `from` in the
// old block go to `to` in the new block.
struct BlockRun {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  std::uint64_t bytes = 0;
  bool operator==(const BlockRun&) const = default;
};

// The runs of the old block (`old_offset`, `old_shape`) inside the new
// block (`new_offset`, `new_shape`), row-major, elements of `element`
// bytes; ascending in both blocks, adjacent runs merged. Empty when the
// blocks do not overlap.
std::vector<BlockRun> overlap_runs(const std::vector<std::int64_t>& old_offset,
                                   const std::vector<std::int64_t>& old_shape,
                                   const std::vector<std::int64_t>& new_offset,
                                   const std::vector<std::int64_t>& new_shape, std::size_t element);

// Why `regions` cannot be restored from the version `manifest` describes on
// another rank count (a region not declared global, one the version lacks
// or holds with another global shape or dtype), or empty when they can.
std::string redistribution_problem(const format::Manifest& manifest, const std::vector<Region>& regions);

struct RedistributionReport {
  std::uint64_t bytes_restored = 0;
  std::uint64_t bytes_read = 0;  // stored bytes of the chunks read
  std::vector<std::byte> metadata;  // old rank 0's
};

// Fills `regions` (redistribution_problem() empty) from the old ranks'
// files in `directory` (L4). CorruptionError for a damaged chunk or a file that
// is not the one the manifest names; NotFoundError for a missing file;
// MismatchError when the old blocks do not cover a new one.
RedistributionReport redistribute(const format::Manifest& manifest, DirectoryLevel& directory,
                                  const std::vector<Region>& regions);

}  // namespace resurgo
