#include "store/restore.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>
#include <variant>

#include "base/clock.h"
#include "base/byte_ranges.h"
#include "base/crash_point.h"
#include "base/thread_pool.h"
#include "format/container.h"

namespace resurgo {

namespace {

std::string describe(int version) { return version == kLatest ? "any version" : "version " + std::to_string(version); }

std::string level_name(const Level& level) { return "L" + std::to_string(level.number()); }

// For region_for where its checks passed before: names no copy.
std::string unnamed() { return ""; }

// The protected region `entry` goes to; nullptr for a region that is not
// protected when the restart reads only the protected ones. `where()`
// names the version's copy for a message, made only when one is thrown.
template <class Where>
const Region* region_for(const RestoreContext& context, const format::RegionEntry& entry, const Where& where) {
  const auto& regions = context.registry.regions();
  const auto it = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.label == entry.label; });
  if (it == regions.end()) {
    if (context.scope == RestartScope::kProtectedRegions) return nullptr;
    throw MismatchError("the checkpoint holds region '" + entry.label + "' (" + std::to_string(entry.bytes) +
                        " bytes) that is not protected" + where() + "; protect it before restart");
  }
  if (it->bytes != entry.bytes) {
    throw MismatchError("region '" + entry.label + "' is protected with " + std::to_string(it->bytes) +
                        " bytes but the checkpoint holds " + std::to_string(entry.bytes) + " bytes" + where());
  }
  if (!it->type.dtype.empty() && !entry.dtype.empty() && it->type.dtype != entry.dtype) {
    throw MismatchError("region '" + entry.label + "' is protected as " + it->type.dtype +
                        " but the checkpoint holds " + entry.dtype + where());
  }
  if (!it->type.shape.empty() && !entry.shape.empty() && it->type.shape != entry.shape) {
    throw MismatchError("region '" + entry.label + "' is protected with another shape than the checkpoint holds" + where());
  }
  return &*it;
}

// Where each region of the version's table goes (nullptr: not read); every
// protected region must be in the checkpoint, and with kExactRegions the
// protected set must be exactly the checkpoint's. `path`: where the version
// is read from, for the messages.
std::vector<std::byte*> destinations(const RestoreContext& context, const format::Header& header,
                                     const std::string& path, int version) {
  const auto where = [&] { return " (version " + std::to_string(version) + ", " + path + ")"; };
  std::vector<std::byte*> list;
  for (const format::RegionEntry& entry : header.regions) {
    const Region* region = region_for(context, entry, where);
    list.push_back(region != nullptr && !region->restored_elsewhere ? region->data : nullptr);
  }
  for (const Region& region : context.registry.regions()) {
    const bool held = std::any_of(header.regions.begin(), header.regions.end(),
                                  [&](const format::RegionEntry& e) { return e.label == region.label; });
    if (!held) throw MismatchError("region '" + region.label + "' is protected but the checkpoint does not hold it" + where());
  }
  return list;
}

// One link of a chain: a copy of one version whose header and index passed
// their checks and which names the expected store, version and rank.
struct Link {
  int version = 0;
  Level* level = nullptr;
  std::unique_ptr<ReadableFile> file;
  format::Container container;
};

// One chunk of the plan, read whole straight into its region.
struct ChunkRead {
  std::size_t link = 0;
  const format::ChunkRecord* chunk = nullptr;
};

// Thrown out of the parallel read: which link failed, with the error.
struct LinkFailure {
  std::size_t link;
  std::exception_ptr error;
};

// Why a chain cannot be restored: the first link without an intact copy.
struct BrokenChain {
  int link = 0;         // the version whose copies are missing or damaged
  bool missing = false;  // no copy at all (deleted by hand) rather than damaged ones
  std::string why;       // "version 12 skipped: its base 10 ..."
};

// What this restart has learnt about the copies of one version. A copy that
// failed once is not tried again: later candidates on the same base get the
// same verdict without reading it again.
struct CopyFaults {
  std::vector<std::pair<Level*, std::string>> damaged;  // failed a check (checksum, format, identity)
  std::vector<std::pair<Level*, std::string>> unreadable;  // I/O error: proves nothing about the bytes
  bool quarantined = false;

  bool excludes(const Level* level) const {
    const auto at = [&](const auto& entry) { return entry.first == level; };
    return std::any_of(damaged.begin(), damaged.end(), at) || std::any_of(unreadable.begin(), unreadable.end(), at);
  }
};

// Restores versions from their chains for one restart (one call of
// restore_version), remembering which copies failed.
class ChainRestorer {
 public:
  ChainRestorer(const RestoreContext& context, bool falling_back, RestartReport& report)
      : context_(context), falling_back_(falling_back), report_(report) {}

  // Restores `version` and fills the report, or says why its chain is
  // broken. A link is retried at another level when its copy fails; an
  // unreadable copy with no intact one elsewhere is a StorageError (its bytes
  // may be fine, so there is no roll-back past it). Once restored, the
  // regions hold the version whole, whatever earlier tries wrote.
  std::optional<BrokenChain> restore(int version, std::vector<std::byte>& metadata) {
    for (;;) {
      const Clock::time_point started = Clock::now();
      auto resolved = resolve(version);
      if (auto* broken = std::get_if<BrokenChain>(&resolved)) return std::move(*broken);
      auto& chain = std::get<std::vector<Link>>(resolved);
      try {
        read_chain(chain, metadata);
      } catch (const LinkFailure& failure) {
        try {
          std::rethrow_exception(failure.error);
        } catch (const Error& error) {
          note_fault(chain[failure.link].version, *chain[failure.link].level, error);
        }
        continue;  // the protected regions may hold part of the chain: read it all again
      }
      finish(chain, started);
      overwritten_.clear();
      return std::nullopt;
    }
  }

  // What this restart did to the protected memory, for the error that ends
  // it: "regions 'u', 'v' may have been partly overwritten with version 7's
  // data before the failure; 'w' is unchanged". A region a chunk was read
  // for counts, whether or not that chunk passed its checksum.
  std::string memory_state() const {
    std::map<int, std::vector<std::string>> changed;  // by version
    std::vector<std::string> unchanged;
    for (const Region& region : context_.registry.regions()) {
      const auto found = overwritten_.find(region.label);
      (found == overwritten_.end() ? unchanged : changed[found->second]).push_back(region.label);
    }
    if (changed.empty()) return "the protected regions are unchanged";
    std::string text;
    for (auto it = changed.rbegin(); it != changed.rend(); ++it) {
      const std::string version = "version " + std::to_string(it->first) + "'s";
      text += text.empty() ? regions_may_have_been(it->second) + " partly overwritten with " + version + " data"
                           : " and " + labels_text(it->second) + " with " + version;
    }
    text += " before the failure";
    if (unchanged.empty()) return text;
    return text + "; " + labels_text(unchanged) + (unchanged.size() > 1 ? " are" : " is") + " unchanged";
  }

 private:
  // The chain of `version` down to a full version, newest first, each link
  // at the fastest level holding an intact-looking copy.
  std::variant<std::vector<Link>, BrokenChain> resolve(int version) {
    std::vector<Link> chain;
    for (int next = version;;) {
      std::optional<Link> link = open_link(next);
      if (!link) return broken_at(version, next);
      if (!chain.empty()) {
        const std::string difference =
            format::region_table_difference(chain.back().container.header, link->container.header);
        if (!difference.empty()) {
          return BrokenChain{next, false,
                             "version " + std::to_string(version) + " skipped: version " +
                                 std::to_string(chain.back().version) + " is a delta of version " +
                                 std::to_string(next) + " but their region tables differ (" + difference + ")"};
        }
      }
      chain.push_back(std::move(*link));
      const format::Header& header = chain.back().container.header;
      if (!format::is_delta(header)) return chain;
      next = static_cast<int>(header.base_version);  // older than `next`: read_container checks it
    }
  }

  std::optional<Link> open_link(int version) {
    for (Level* level : context_.levels) {
      if (faults_[version].excludes(level) || !level->holds(version)) continue;
      try {
        Link link{version, level, level->open(version), {}};
        link.container = format::read_container(*link.file);
        context_.store.check(link.container, link.file->path(), version, context_.rank);
        return link;
      } catch (const NotFoundError&) {
        continue;  // removed since holds(): not a copy any more
      } catch (const Error& error) {
        note_fault(version, *level, error);
      }
    }
    return std::nullopt;
  }

  void note_fault(int version, Level& level, const Error& error) {
    const std::string line = "version " + std::to_string(version) + " at " + level_name(level) +
                             " skipped: " + error.what();
    context_.log.warn(line);
    report_.skipped.push_back(line);
    auto& list = error.code() == ErrorCode::kStorage ? faults_[version].unreadable : faults_[version].damaged;
    list.emplace_back(&level, error.what());
  }

  // `link` of `version`'s chain has no intact copy left.
  BrokenChain broken_at(int version, int link) {
    CopyFaults& faults = faults_[link];
    if (!faults.unreadable.empty()) {
      throw StorageError("restart: version " + std::to_string(link) + " of store '" + context_.store.name +
                         "' could not be read (nothing was quarantined): " + faults.unreadable.front().second +
                         "; retry, or restart an older version explicitly");
    }
    const std::string subject = "version " + std::to_string(version) + " skipped: " +
                                (link == version ? std::string("it") : "its base " + std::to_string(link));
    if (faults.damaged.empty()) {
      std::string where;
      for (Level* level : context_.levels) where += (where.empty() ? "" : ", ") + level->where();
      return BrokenChain{link, true, subject + " is missing from every level (" + where + "; deleted by hand?)"};
    }
    std::string causes;
    for (const auto& [level, what] : faults.damaged) {
      causes += (causes.empty() ? "" : "; ") + level_name(*level) + ": " + what;
    }
    if (falling_back_) quarantine(link, faults);
    return BrokenChain{link, false, subject + " is damaged at every level holding it (" + causes + ")"};
  }

  // The restart falls back past a version damaged on every level: set its
  // copies aside so that it is neither offered nor restored again.
  void quarantine(int version, CopyFaults& faults) {
    if (std::exchange(faults.quarantined, true)) return;
    for (const auto& [level, what] : faults.damaged) {
      try {
        level->quarantine(version);
      } catch (const Error& error) {
        context_.log.warn(std::string("could not quarantine a damaged copy: ") + error.what());
      }
    }
  }

  // Where the chunks of a chain go: each region's memory (nullptr: not
  // read), and whether a chunk may have been written into it yet.
  struct Targets {
    std::vector<std::byte*> regions;
    mutable std::vector<std::atomic<bool>> written;

    // Region `index`'s memory, counted as written from now on.
    std::byte* region_written(std::size_t index) const {
      written[index].store(true, std::memory_order_relaxed);
      return regions[index];
    }
  };

  // Plans the chain (plan_waves), then reads each wave's chunks in
  // parallel, one wave after the other. The first failing chunk stops the
  // reads; the regions written so far are remembered for memory_state() and
  // the caller reads the whole chain again (from another level) or gives up.
  void read_chain(const std::vector<Link>& chain, std::vector<std::byte>& metadata) {
    const Link& newest = chain.front();
    TraceSpan span(context_.trace, [&] { return "restore from " + level_name(*newest.level); }, newest.version);
    const Targets targets{destinations(context_, newest.container.header, newest.file->path(), newest.version),
                          std::vector<std::atomic<bool>>(newest.container.header.regions.size())};
    try {
      for (const std::vector<ChunkRead>& wave : plan_waves(chain, targets.regions)) read_wave(chain, wave, targets);
    } catch (...) {
      note_overwritten(newest, targets);
      throw;
    }
    metadata = newest.container.header.metadata;
    if (context_.table != nullptr) *context_.table = newest.container.header.regions;
  }

  void read_wave(const std::vector<Link>& chain, const std::vector<ChunkRead>& wave, const Targets& targets) {
    const std::vector<std::pair<std::size_t, std::size_t>> runs = runs_of(chain, wave);
    context_.pool.parallel_for(runs.size(), work_bytes(chain, wave), [&](std::size_t i) {
      const auto [first, count] = runs[i];
      const Link& link = chain[wave[first].link];
      try {
        if (in_run(link, wave[first])) {
          read_run(link, &wave[first], count, targets);
        } else {
          read_planned(link, wave[first], targets);
        }
      } catch (const Error&) {
        throw LinkFailure{wave[first].link, std::current_exception()};
      }
    });
  }

  // Device and managed regions are read into host copies that reach them
  // only once the restart succeeded (Capture::restart_targets): they never
  // count.
  void note_overwritten(const Link& newest, const Targets& targets) {
    const std::vector<format::RegionEntry>& entries = newest.container.header.regions;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Region* region = targets.written[i] ? region_for(context_, entries[i], unnamed) : nullptr;
      if (region != nullptr && region->kind == MemoryKind::kHost) overwritten_[region->label] = newest.version;
    }
  }

  // The chunks to read, in waves that must land one after the other. The
  // chain is claimed newest first, so that no chunk a newer link holds whole
  // is read. A chunk a newer link holds in part is read whole (its checksum
  // covers all of it) straight into its region, in a wave before every
  // newer link's chunks, which then overwrite their part: the partly held
  // chunks of the oldest link first, then of each newer link, then every
  // chunk no newer link holds any of. Within a wave no two chunks overlap.
  static std::vector<std::vector<ChunkRead>> plan_waves(const std::vector<Link>& chain,
                                                        const std::vector<std::byte*>& targets) {
    std::vector<ByteRanges> claimed(chain.front().container.header.regions.size());
    std::vector<std::vector<ChunkRead>> waves(chain.size() + 1);  // partly held by link, oldest first; then the rest
    for (std::size_t l = 0; l < chain.size(); ++l) {
      const std::vector<format::ChunkRecord>& chunks = chain[l].container.chunks;
      const std::vector<ByteRanges::Held> held = claim_link(chunks, targets, claimed);
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        if (targets[chunks[c].region] == nullptr || held[c] == ByteRanges::Held::kAll) continue;
        const std::size_t wave = held[c] == ByteRanges::Held::kPart ? chain.size() - 1 - l : chain.size();
        waves[wave].push_back({l, &chunks[c]});
      }
    }
    std::erase_if(waves, [](const std::vector<ChunkRead>& wave) { return wave.empty(); });
    return waves;
  }

  // Claims one link's chunks region by region, in order of offset; how much
  // of each chunk (in the link's order) newer links held.
  static std::vector<ByteRanges::Held> claim_link(const std::vector<format::ChunkRecord>& chunks,
                                                  const std::vector<std::byte*>& targets,
                                                  std::vector<ByteRanges>& claimed) {
    std::vector<std::size_t> order(chunks.size());
    for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
    const auto by_place = [&](std::size_t a, std::size_t b) {
      return std::pair(chunks[a].region, chunks[a].offset) < std::pair(chunks[b].region, chunks[b].offset);
    };
    if (!std::is_sorted(order.begin(), order.end(), by_place)) std::sort(order.begin(), order.end(), by_place);
    std::vector<ByteRanges::Held> held(chunks.size(), ByteRanges::Held::kAll);
    for (std::size_t first = 0; first < order.size();) {
      const std::uint32_t region = chunks[order[first]].region;
      std::size_t end = first;
      std::vector<ByteRange> ranges;
      for (; end < order.size() && chunks[order[end]].region == region; ++end) {
        const format::ChunkRecord& chunk = chunks[order[end]];
        ranges.push_back({chunk.offset, chunk.offset + chunk.raw_length});
      }
      if (targets[region] != nullptr) {
        const std::vector<ByteRanges::Held> region_held = claimed[region].claim(ranges);
        for (std::size_t i = first; i < end; ++i) held[order[i]] = region_held[i - first];
      }
      first = end;
    }
    return held;
  }

  // What the reads cost, for parallel_for: raw chunks from a memory level
  // are copies at memory speed, counted by their bytes; decompression and
  // file reads are always worth a worker.
  static std::uint64_t work_bytes(const std::vector<Link>& chain, const std::vector<ChunkRead>& wave) {
    std::uint64_t bytes = 0;
    for (const ChunkRead& read : wave) {
      const Level::Features source = chain[read.link].level->features();
      if (read.chunk->codec != Codec::kNone || !source.is_volatile || source.device) return ThreadPool::kAlwaysShared;
      bytes += read.chunk->raw_length;
    }
    return bytes;
  }

  // Runs of a wave, as (first, count): small chunks of one link that lie
  // back to back in its file are read together, up to 1 MiB, so that a
  // delta of scattered 4 KiB blocks costs a read per MiB, not two per block.
  // A chunk read with its neighbours (read_run); larger ones, and every one
  // of a memory level, are read straight into their region (read_planned),
  // their checksum computed on the way.
  static bool small(const ChunkRead& read) { return read.chunk->stored_length < (256u << 10); }

  // Small chunks of the memory level (host memory) are read one by one like
  // large ones, straight into their regions: a read there costs no system
  // call, and their bytes are copied once rather than into a run and out.
  static bool in_run(const Link& link, const ChunkRead& read) {
    const Level::Features features = link.level->features();
    return small(read) && !(features.is_volatile && !features.device);
  }

  static std::vector<std::pair<std::size_t, std::size_t>> runs_of(const std::vector<Link>& chain,
                                                                   const std::vector<ChunkRead>& wave) {
    constexpr std::uint64_t kRunBytes = 1u << 20;
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    for (std::size_t i = 0; i < wave.size();) {
      std::size_t end = i + 1;
      const std::uint64_t begin_offset = wave[i].chunk->file_offset - format::kChunkRecordBytes;
      while (in_run(chain[wave[i].link], wave[i]) && end < wave.size() && small(wave[end]) &&
             wave[end].link == wave[i].link) {
        const format::ChunkRecord& previous = *wave[end - 1].chunk;
        const format::ChunkRecord& next = *wave[end].chunk;
        const bool adjacent = next.file_offset - format::kChunkRecordBytes == previous.file_offset + previous.stored_length;
        if (!adjacent || next.file_offset + next.stored_length - begin_offset > kRunBytes) break;
        ++end;
      }
      runs.emplace_back(i, end - i);
      i = end;
    }
    return runs;
  }

  // Chunks are read straight into their regions, as the format reads them:
  // large uncompressed ones are verified there, the others (compressed,
  // small) before they are decoded or copied. Verifying every chunk before
  // it lands would cost one more pass over every byte restored (a quarter
  // more time from the page cache); so a region counts as written from the
  // first chunk read for it, and a failed restart names it (memory_state).
  static void read_planned(const Link& link, const ChunkRead& read, const Targets& targets) {
    thread_local std::vector<std::byte> scratch;  // stored bytes of a compressed chunk
    const format::ChunkRecord& chunk = *read.chunk;
    format::check_chunk_record(*link.file, link.container, chunk);  // one 48-byte read per chunk
    std::byte* region = targets.region_written(chunk.region);
    format::read_chunk(*link.file, link.container, chunk, region + chunk.offset, scratch);
    RESURGO_CRASH_POINT("restore.chunk", link.level->number());
  }

  // `count` small chunks lying back to back in the file, records included: one read.
  static void read_run(const Link& link, const ChunkRead* reads, std::size_t count, const Targets& targets) {
    thread_local std::vector<std::byte> bytes;
    const std::uint64_t begin = reads[0].chunk->file_offset - format::kChunkRecordBytes;
    const format::ChunkRecord& last = *reads[count - 1].chunk;
    bytes.resize(last.file_offset + last.stored_length - begin);
    link.file->read_at(begin, bytes.data(), bytes.size());
    for (const ChunkRead* read = reads; read != reads + count; ++read) {
      const format::ChunkRecord& chunk = *read->chunk;
      const std::byte* record = bytes.data() + (chunk.file_offset - format::kChunkRecordBytes - begin);
      std::byte* region = targets.region_written(chunk.region);
      format::decode_chunk(*link.file, link.container, chunk, record, region + chunk.offset);
      RESURGO_CRASH_POINT("restore.chunk", link.level->number());
    }
  }

  void finish(const std::vector<Link>& chain, Clock::time_point started) {
    const Link& newest = chain.front();
    report_.version = newest.version;
    report_.level = newest.level->number();
    report_.bytes = 0;
    for (const format::RegionEntry& entry : newest.container.header.regions) {
      if (region_for(context_, entry, unnamed) != nullptr) report_.bytes += entry.bytes;  // the regions restored
    }
    report_.chain.clear();
    for (const Link& link : chain) report_.chain.push_back(link.version);
    report_.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    for (const Link& link : chain) repair(link);
  }

  // Rewrites the damaged copies of a link from the intact one it was read from.
  void repair(const Link& intact) {
    for (const auto& [bad, what] : faults_[intact.version].damaged) {
      try {
        bad->commit_copy(intact.version, *intact.level->open(intact.version));
        context_.log.warn("repaired version " + std::to_string(intact.version) + " at " + level_name(*bad) +
                          " from the intact copy at " + level_name(*intact.level));
      } catch (const Error& error) {
        context_.log.warn(std::string("could not repair a damaged copy: ") + error.what());
      }
    }
  }

  static std::string labels_text(const std::vector<std::string>& labels) {
    std::string text;
    for (const std::string& label : labels) text += (text.empty() ? "'" : ", '") + label + "'";
    return text;
  }

  // "region 'u' may have been", "regions 'u', 'v' may have been"
  static std::string regions_may_have_been(const std::vector<std::string>& labels) {
    return (labels.size() > 1 ? "regions " : "region ") + labels_text(labels) + " may have been";
  }

  const RestoreContext& context_;
  const bool falling_back_;
  RestartReport& report_;
  std::map<int, CopyFaults> faults_;
  // Protected regions a failed read of a chain wrote into, with the version
  // being restored; cleared once a version was restored whole.
  std::map<std::string, int> overwritten_;
};

std::string chain_text(const std::vector<int>& chain) {
  std::string text;
  for (int version : chain) text += (text.empty() ? "" : " <- ") + std::to_string(version);
  return text;
}

// The versions a restart of `version` may restore, newest first.
std::vector<int> candidates_for(const RestoreContext& context, int version) {
  std::vector<int> candidates;
  if (version == kLatest) {
    for (const auto& [held, levels] : committed_versions(context.levels)) candidates.insert(candidates.begin(), held);
  } else if (std::any_of(context.levels.begin(), context.levels.end(), [&](Level* l) { return l->holds(version); })) {
    candidates.push_back(version);
  }
  if (candidates.empty()) {
    std::string where;
    for (Level* level : context.levels) where += (where.empty() ? "" : " or ") + level->where();
    throw NotFoundError("restart: store '" + context.store.name + "' rank " + std::to_string(context.rank) + " has no " +
                        (version == kLatest ? std::string("checkpoint") : "version " + std::to_string(version)) +
                        " in " + where);
  }
  return candidates;
}

void log_restored(const RestoreContext& context, int version, std::size_t broken, const RestartReport& report) {
  const std::string chain = report.chain.size() > 1 ? " from its chain " + chain_text(report.chain) : "";
  if (broken > 0) {
    context.log.warn("restarted from version " + std::to_string(version) + chain + ": the chains of " +
                     std::to_string(broken) + " newer versions are broken (" +
                     std::to_string(report.skipped.size()) + " lines in the restart report)");
  } else if (!report.skipped.empty()) {
    context.log.warn("restarted from version " + std::to_string(version) + chain + " after skipping " +
                     std::to_string(report.skipped.size()) + " damaged copies");
  } else {
    context.log.info("restarted from version " + std::to_string(version) + chain);
  }
}

// The first of `candidates` whose chain is intact, restored.
int restore_first_intact(const RestoreContext& context, int version, const std::vector<int>& candidates,
                         ChainRestorer& restorer, RestartReport& report, std::vector<std::byte>& metadata) {
  std::size_t broken = 0;
  for (int candidate : candidates) {
    const std::optional<BrokenChain> failure = restorer.restore(candidate, metadata);
    if (!failure) {
      log_restored(context, candidate, broken, report);
      return candidate;
    }
    ++broken;
    // The copies of the candidate itself already have their lines; a chain
    // broken below it gets one of its own.
    if (failure->link != candidate) {
      context.log.warn(failure->why);
      report.skipped.push_back(failure->why);
    }
    if (version != kLatest && failure->missing) {
      throw NotFoundError("restart: version " + std::to_string(candidate) + " of store '" + context.store.name +
                          "' cannot be restored: " + failure->why);
    }
  }
  std::string causes;
  for (const std::string& line : report.skipped) causes += "\n  " + line;
  throw CorruptionError("restart: no intact copy of " + describe(version) + " of store '" + context.store.name +
                        "':" + causes);
}

// `message` with what the restart did to the protected memory at the end
// of its first line (the lines after it list the copies skipped).
std::string with_memory_state(const std::string& message, const std::string& state) {
  const std::size_t line_end = std::min(message.find('\n'), message.size());
  const bool colon = line_end > 0 && message[line_end - 1] == ':';
  const std::size_t at = colon ? line_end - 1 : line_end;
  return message.substr(0, at) + " (" + state + ")" + message.substr(at);
}

// The extents in pieces of at most this many bytes, so that parallel_for
// shares a large region's copy.
constexpr std::uint64_t kBufferCopyPiece = std::uint64_t{1} << 20;

std::vector<Extent> in_pieces(const std::vector<Extent>& extents) {
  std::vector<Extent> pieces;
  for (const Extent& extent : extents) {
    for (std::uint64_t offset = 0; offset < extent.bytes; offset += kBufferCopyPiece) {
      const std::uint64_t bytes = std::min(kBufferCopyPiece, extent.bytes - offset);
      pieces.push_back(Extent{extent.region, extent.offset + offset, bytes, extent.source + offset});
    }
  }
  return pieces;
}

}  // namespace

int restore_version(const RestoreContext& context, int version, RestartReport& report,
                    std::vector<std::byte>& metadata) {
  report = RestartReport{};
  const std::vector<int> candidates = candidates_for(context, version);
  ChainRestorer restorer(context, version == kLatest, report);
  try {
    return restore_first_intact(context, version, candidates, restorer, report, metadata);
  } catch (const Error& error) {
    rethrow_as_is(Error(error.code(), with_memory_state(error.what(), restorer.memory_state())));
  }
}

void restore_in_flight(const RestoreContext& context, int version, const format::Header& header,
                       const std::vector<Extent>& extents, RestartReport& report) {
  const Clock::time_point started = Clock::now();
  TraceSpan span(context.trace, "restore from the capture's buffer", version);
  report = RestartReport{};
  const std::vector<std::byte*> targets = destinations(context, header, "the capture's buffer", version);
  const std::vector<Extent> pieces = in_pieces(extents);
  context.pool.parallel_for(pieces.size(), total_bytes(pieces), [&](std::size_t i) {
    const Extent& piece = pieces[i];
    if (targets[piece.region] != nullptr) std::memcpy(targets[piece.region] + piece.offset, piece.source, piece.bytes);
  });
  report.version = version;
  report.level = kL1;
  for (std::size_t i = 0; i < header.regions.size(); ++i) {
    if (targets[i] != nullptr) report.bytes += header.regions[i].bytes;
  }
  report.chain = {version};
  report.seconds = seconds_since(started);
  if (context.table != nullptr) *context.table = header.regions;
}

void StoreIdentity::check(const format::Container& container, const std::string& path, int version,
                          int rank) const {
  format::check_identity(container, path, name, version, rank);
  if (!accept_foreign) format::check_store_id(container, path, id);
}

VersionDescription describe_version(const std::vector<Level*>& levels, const StoreIdentity& store, int rank,
                                    int version) {
  std::string damage;
  for (Level* candidate : levels) {
    if (!candidate->holds(version)) continue;
    try {
      const std::unique_ptr<ReadableFile> file = candidate->open(version);
      const format::Container container = format::read_container(*file);
      store.check(container, file->path(), version, rank);
      VersionDescription description{version, {}, container.header.metadata};
      for (const format::RegionEntry& entry : container.header.regions) {
        description.regions.push_back({entry.id, entry.label, entry.bytes, ElementType{entry.dtype, entry.shape},
                                       static_cast<MemoryKind>(entry.kind)});
      }
      return description;
    } catch (const Error& error) {
      if (error.code() != ErrorCode::kCorrupt && error.code() != ErrorCode::kFormat &&
          error.code() != ErrorCode::kMismatch) {
        throw;
      }
      damage += (damage.empty() ? "" : "; ") + std::string(error.what());
    }
  }
  if (damage.empty()) throw NotFoundError("describe: store '" + store.name + "' has no version " + std::to_string(version));
  throw CorruptionError("describe: every copy of version " + std::to_string(version) + " of store '" + store.name +
                        "' is damaged: " + damage);
}

std::vector<VersionInfo> list_versions(const std::vector<Level*>& levels, Catalog& catalog) {
  std::map<int, VersionInfo> found;
  for (auto& [version, held] : committed_versions(levels)) found[version] = VersionInfo{version, std::move(held), false};
  for (const auto& [version, only_in_buffer] : catalog.pending()) {
    VersionInfo& info = found[version];
    info.version = version;
    info.pending = true;
    if (only_in_buffer && (info.levels.empty() || info.levels.front() != kL1)) {
      info.levels.insert(info.levels.begin(), kL1);
    }
  }
  std::vector<VersionInfo> list;
  for (auto& [version, info] : found) {
    if (!catalog.discarded(version)) list.push_back(std::move(info));
  }
  return list;
}

void check_held(const std::vector<Level*>& levels, Catalog& catalog, const std::string& store, int version,
                const char* call) {
  if (catalog.known(version)) return;
  std::string where;
  for (Level* level : levels) {
    if (level->holds(version)) return;
    where += (where.empty() ? "" : ", ") + level->where();
  }
  throw NotFoundError(std::string(call) + ": store '" + store + "' has no version " + std::to_string(version) +
                      " (looked in " + where + ")");
}

}  // namespace resurgo
