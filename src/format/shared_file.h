// Shared file: one file per version for every rank of an MPI store
// (persistent.layout = shared; docs/format.md, "Shared file"). Each rank's
// container is copied verbatim (its header, chunks with their checksums,
// index and footer) at an offset the ranks agreed, and rank 0 appends an
// index of the parts:
//   part of rank 0 | part of rank 1 | ... | part index | shared footer
// The part index holds, per rank, the part's offset, size and container
// checksum (header+index); the shared footer the magic, the version, the
// number of ranks, the index offset and an XXH3-64 of index and footer.
// A part is read through a window (PartFile) as the container file it was:
// every offset inside it is relative to its start.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "resurgo/env.hpp"

namespace resurgo::format {

inline constexpr std::size_t kSharedFooterBytes = 40;
inline constexpr std::size_t kSharedPartBytes = 24;  // one entry of the part index
inline constexpr std::uint32_t kMaxSharedRanks = 1u << 24;

struct SharedPart {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;  // the part's container checksum (its footer's)
};

struct SharedIndex {
  std::int64_t version = 0;
  std::vector<SharedPart> parts;  // by rank
};

// The part index and shared footer that follow the parts (`index_offset`:
// where they start, the end of the last part).
std::vector<std::byte> encode_shared_index(const SharedIndex& index, std::uint64_t index_offset);

// Reads and checks the part index of a shared file: footer magic and
// checksum, a size that ends exactly at the footer, parts in rank order
// that neither overlap nor run into the index. CorruptionError naming the
// path (a truncated or torn file) otherwise; nothing is allocated before the
// number of ranks is bounded by the file size.
SharedIndex read_shared_index(const ReadableFile& file);

// Rank `rank`'s part of the shared file `file` (read_shared_index's `part`),
// read as a container file of its own; its path names the rank.
std::unique_ptr<ReadableFile> open_part(std::shared_ptr<const ReadableFile> file, const SharedPart& part, int rank);

}  // namespace resurgo::format
