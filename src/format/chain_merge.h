// The bytes of the newest version of a delta chain, produced range by range
// in file order, without a buffer of the whole state: compaction
// (pipeline/compactor.h) writes the chain's full version one output chunk at
// a time, each filled from the chain just before it is checksummed and
// written, while its bytes are still in the CPU cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "format/container.h"
#include "resurgo/env.hpp"

namespace resurgo::format {

// One version of a chain, its file held open while the chain is merged: an
// eviction or a newer compaction may rename or remove the name meanwhile.
struct ChainLink {
  std::unique_ptr<ReadableFile> file;
  Container container;
};

// Every byte of the newest version: the full version's, then each delta's
// over them, oldest first, the newest write winning, as restore merges a
// chain. Each chunk of every link is read, its checksum verified (read_chunk)
// and decoded once, whatever the output chunks' size against the links'.
class ChainMerge {
 public:
  // `chain`: newest first, down to its full version (whose chunks tile every
  // region: read_container checks it). It must outlive the merge.
  explicit ChainMerge(const std::vector<ChainLink>& chain);

  // Puts bytes [offset, offset + bytes) of region `region` into
  // `destination`. The calls must cover every region of non-zero size whole,
  // in order, each range starting where the previous one of its region ended.
  // Throws CorruptionError (or FormatError) naming the file and chunk when a
  // link's chunk does not verify.
  void fill(std::uint32_t region, std::uint64_t offset, std::uint64_t bytes, std::byte* destination);

  // Throws StorageError unless every chunk of every link was merged: a
  // caller's ranges that skipped some would leave bytes unwritten.
  void check_complete() const;

 private:
  // One link's chunks in region and offset order, and how far the ranges
  // filled so far have taken them.
  struct Link {
    const ReadableFile* file = nullptr;
    const Container* container = nullptr;
    std::vector<const ChunkRecord*> chunks;
    std::size_t next = 0;  // the first chunk not wholly merged yet
    // chunks[next] decoded, while it reaches past the last range filled:
    // the next range takes the rest of it without reading it again.
    std::vector<std::byte> held;
    bool holding = false;
  };

  void fill_from(Link& link, std::uint32_t region, std::uint64_t begin, std::uint64_t end, std::byte* destination);

  std::vector<Link> links_;  // oldest (the full version) first
  std::vector<std::byte> scratch_;  // a compressed chunk's stored bytes
};

}  // namespace resurgo::format
