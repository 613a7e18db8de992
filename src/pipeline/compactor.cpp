#include "pipeline/compactor.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/crash_point.h"
#include "base/printable.h"
#include "base/thread_pool.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// One region's merged bytes. calloc, not a zero-filled vector: a large
// region is a fresh mapping, which the kernel hands over zeroed, and glibc's
// calloc then skips the memset, a pass over the whole state that a vector
// adds to the memory traffic compaction shares with the application
// (bench/results/incremental.md, "Compaction's own cost").
struct FreeBytes {
  void operator()(std::byte* bytes) const { std::free(bytes); }
};
using RegionBytes = std::unique_ptr<std::byte[], FreeBytes>;

RegionBytes zeroed_bytes(const format::RegionEntry& entry) {
  RegionBytes region(static_cast<std::byte*>(std::calloc(entry.bytes == 0 ? 1 : entry.bytes, 1)));
  if (!region) {
    throw StorageError("out of memory for the " + std::to_string(entry.bytes) + " bytes of region '" +
                       printable(entry.label) + "' (a compaction holds the whole state once); free memory "
                       "or set delta.compact_after = 0");
  }
  return region;
}

// One version of a chain, its file held open while the chain is merged: an
// eviction or a newer compaction may rename or remove the name meanwhile.
struct Link {
  std::unique_ptr<ReadableFile> file;
  format::Container container;
};

int chain_deltas(Level& level, int version, const KnownBases& known_bases) {
  int deltas = 0;
  for (std::optional<int> base = level.base_of(version, known_bases); base; base = level.base_of(*base, known_bases)) {
    ++deltas;
  }
  return deltas;
}

// The chain of `version` on `level`, newest first, down to its full version.
// Each link is checked as restore checks it: its own version, the store and
// rank of the newest link, the same region table.
std::vector<Link> read_chain(Level& level, int version) {
  std::vector<Link> chain;
  for (int next = version;;) {
    Link link{level.open(next), {}};
    link.container = format::read_container(*link.file);
    const format::Header& header = link.container.header;
    const std::string& path = link.file->path();
    if (chain.empty()) {
      format::check_identity(link.container, path, "", next, static_cast<int>(header.rank));
    } else {
      const format::Header& newest = chain.front().container.header;
      format::check_identity(link.container, path, newest.store, next, static_cast<int>(newest.rank));
      format::check_store_id(link.container, path, newest.store_id);
      const std::string difference = format::region_table_difference(chain.back().container.header, header);
      if (!difference.empty()) {
        throw CorruptionError("checkpoint file '" + printable(path) + "' is the base of version " +
                              std::to_string(chain.back().container.header.version) + " but its regions differ (" +
                              difference + ")");
      }
    }
    chain.push_back(std::move(link));
    if (!format::is_delta(header)) return chain;
    next = static_cast<int>(header.base_version);  // older than `next`: read_container checks it
  }
}

std::uint64_t state_bytes(const format::Header& header) {
  std::uint64_t bytes = 0;
  for (const format::RegionEntry& region : header.regions) bytes += region.bytes;
  return bytes;
}

// Every byte of the newest version: the full version's, then each delta's
// over them, oldest first. Every chunk's checksum is verified on the way.
std::vector<RegionBytes> merge(const std::vector<Link>& chain) {
  std::vector<RegionBytes> regions;
  for (const format::RegionEntry& region : chain.front().container.header.regions) {
    regions.push_back(zeroed_bytes(region));
  }
  std::vector<std::byte> scratch;
  for (auto link = chain.rbegin(); link != chain.rend(); ++link) {
    for (const format::ChunkRecord& chunk : link->container.chunks) {
      format::read_chunk(*link->file, link->container, chunk, regions[chunk.region].get() + chunk.offset, scratch);
    }
  }
  return regions;
}

}  // namespace

bool compactable(const Level& level) {
  const Level::Features features = level.features();
  return !features.is_volatile && !features.device && !features.collective;
}

Compaction compact_version(Level& level, int version, int compact_after, std::uint64_t max_bytes,
                           const KnownBases& known_bases, const Config::Pipeline& pipeline) {
  Compaction result;
  result.deltas = chain_deltas(level, version, known_bases);
  result.full = result.deltas == 0;
  if (result.deltas <= compact_after) return result;
  // The files decide: the copy here may be full already (copied from a
  // level that compacted it) though the version was captured as a delta.
  const std::vector<Link> chain = read_chain(level, version);
  result.deltas = static_cast<int>(chain.size()) - 1;
  result.full = result.deltas == 0;
  format::Header header = chain.front().container.header;
  result.too_large = state_bytes(header) > max_bytes;
  if (result.deltas <= compact_after || result.too_large) return result;
  const std::vector<RegionBytes> regions = merge(chain);
  RESURGO_CRASH_POINT("compact.merged", level.number());
  header.base_version = -1;
  header.chunk_size = pipeline.chunk_size;
  std::vector<const std::byte*> sources;
  for (const RegionBytes& region : regions) sources.push_back(region.get());
  // A pool without workers: every chunk is checksummed (and compressed) on
  // this thread, whose priority the Scheduler lowered. The pipeline's
  // workers run at the application's priority: lent to a compaction, they
  // would compete with it at that priority for a core.
  ThreadPool this_thread_only(0);
  level.commit(version, [&](WritableFile& file) {
    result.stored_bytes = write_version(file, header, sources, pipeline, this_thread_only);
  });
  result.full = result.rewritten = true;
  return result;
}

}  // namespace resurgo
