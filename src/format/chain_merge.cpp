#include "format/chain_merge.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/printable.h"
#include "resurgo/errors.hpp"

namespace resurgo::format {

ChainMerge::ChainMerge(const std::vector<ChainLink>& chain) {
  for (auto link = chain.rbegin(); link != chain.rend(); ++link) {
    Link merged;
    merged.file = link->file.get();
    merged.container = &link->container;
    for (const ChunkRecord& chunk : link->container.chunks) merged.chunks.push_back(&chunk);
    // File order is the writer's; the ranges come in region and offset order.
    std::sort(merged.chunks.begin(), merged.chunks.end(), [](const ChunkRecord* a, const ChunkRecord* b) {
      return a->region != b->region ? a->region < b->region : a->offset < b->offset;
    });
    links_.push_back(std::move(merged));
  }
}

// The full version's chunks tile the range; each delta's then overwrite
// their bytes in it, oldest first, so the newest write wins.
void ChainMerge::fill(std::uint32_t region, std::uint64_t offset, std::uint64_t bytes, std::byte* destination) {
  for (Link& link : links_) fill_from(link, region, offset, offset + bytes, destination);
}

// Iterates over the link's chunks in the ranges' order, so that each is read
// and verified once: a chunk inside [begin, end) is decoded straight into
// place; one that reaches past `end` (its link's chunks are larger than the
// output's, or not aligned with them) is decoded into `held`, kept for the
// next range, and dropped once a range takes its last byte. A link holds at
// most one chunk, so a merge holds at most one chunk per link.
void ChainMerge::fill_from(Link& link, std::uint32_t region, std::uint64_t begin, std::uint64_t end,
                           std::byte* destination) {
  for (; link.next < link.chunks.size(); ++link.next) {
    const ChunkRecord& chunk = *link.chunks[link.next];
    if (chunk.region != region || chunk.offset >= end) return;
    const std::uint64_t chunk_end = chunk.offset + chunk.raw_length;
    if (chunk.offset >= begin && chunk_end <= end) {
      read_chunk(*link.file, *link.container, chunk, destination + (chunk.offset - begin), scratch_);
      continue;
    }
    if (!link.holding) {
      link.held.resize(chunk.raw_length);  // bounded by its region's size (read_container)
      read_chunk(*link.file, *link.container, chunk, link.held.data(), scratch_);
      link.holding = true;
    }
    const std::uint64_t from = std::max(begin, chunk.offset);
    const std::uint64_t to = std::min(end, chunk_end);
    std::memcpy(destination + (from - begin), link.held.data() + (from - chunk.offset), to - from);
    if (chunk_end > end) return;
    link.holding = false;
  }
}

void ChainMerge::check_complete() const {
  for (const Link& link : links_) {
    if (link.next != link.chunks.size()) {
      throw StorageError("merging the chain of version " + std::to_string(links_.back().container->header.version) +
                         ": chunk " + std::to_string(link.next) + " of '" + printable(link.file->path()) +
                         "' was never merged (an internal error, please report it: the compaction is not "
                         "committed, the delta chain stays as it was)");
    }
  }
}

}  // namespace resurgo::format
