#include "pipeline/compactor.h"

#include <string>
#include <vector>

#include "base/crash_point.h"
#include "base/printable.h"
#include "base/thread_pool.h"
#include "format/chain_merge.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

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
std::vector<format::ChainLink> read_chain(Level& level, int version) {
  std::vector<format::ChainLink> chain;
  for (int next = version;;) {
    format::ChainLink link{level.open(next), {}};
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

}  // namespace

bool compactable(const Level& level) {
  const Level::Features features = level.features();
  return !features.is_volatile && !features.device && !features.collective;
}

Compaction compact_version(Level& level, int version, int compact_after, Pacer& pacer, const KnownBases& known_bases,
                           const Config::Pipeline& pipeline) {
  Compaction result;
  result.deltas = chain_deltas(level, version, known_bases);
  result.full = result.deltas == 0;
  if (result.deltas <= compact_after) return result;
  // The files decide: the copy here may be full already (copied from a
  // level that compacted it) though the version was captured as a delta.
  const std::vector<format::ChainLink> chain = read_chain(level, version);
  result.deltas = static_cast<int>(chain.size()) - 1;
  result.full = result.deltas == 0;
  if (result.deltas <= compact_after) return result;
  format::Header header = chain.front().container.header;
  header.base_version = -1;
  header.chunk_size = pipeline.chunk_size;
  // A pool without workers: every chunk is merged, checksummed (and
  // compressed) on this thread, whose priority the Scheduler lowered, one
  // at a time. The pipeline's workers run at the application's priority:
  // lent to a compaction, they would compete with it at that priority for a core.
  ThreadPool this_thread_only(0);
  level.commit(version, [&](WritableFile& file) {
    format::ChainMerge merge(chain);
    const FillChunk fill = [&](std::uint32_t region, std::uint64_t offset, std::uint64_t bytes, std::byte* into) {
      pacer.before_step();
      merge.fill(region, offset, bytes, into);
    };
    result.stored_bytes = write_version(file, header, fill, pipeline, this_thread_only);
    merge.check_complete();
    RESURGO_CRASH_POINT("compact.merged", level.number());  // the whole chain in the temporary, not yet synced
  });
  result.full = result.rewritten = true;
  return result;
}

}  // namespace resurgo
