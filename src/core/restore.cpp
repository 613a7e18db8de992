#include "core/restore.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/crash_point.h"
#include "format/container.h"

namespace resurgo {

namespace {

using Clock = std::chrono::steady_clock;

std::string describe(int version) { return version == kLatest ? "any version" : "version " + std::to_string(version); }

const Region& region_for(const RestoreContext& context, const format::RegionEntry& entry, const std::string& where) {
  const auto& regions = context.registry.regions();
  const auto it = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.label == entry.label; });
  if (it == regions.end()) {
    throw MismatchError("the checkpoint holds region '" + entry.label + "' (" + std::to_string(entry.bytes) +
                        " bytes) that is not protected" + where + "; protect it before restart");
  }
  if (it->bytes != entry.bytes) {
    throw MismatchError("region '" + entry.label + "' is protected with " + std::to_string(it->bytes) +
                        " bytes but the checkpoint holds " + std::to_string(entry.bytes) + " bytes" + where);
  }
  if (!it->type.dtype.empty() && !entry.dtype.empty() && it->type.dtype != entry.dtype) {
    throw MismatchError("region '" + entry.label + "' is protected as " + it->type.dtype +
                        " but the checkpoint holds " + entry.dtype + where);
  }
  if (!it->type.shape.empty() && !entry.shape.empty() && it->type.shape != entry.shape) {
    throw MismatchError("region '" + entry.label + "' is protected with another shape than the checkpoint holds" + where);
  }
  return *it;
}

// Where each region of the container goes; the protected set must be exactly
// the checkpoint's.
std::vector<std::byte*> destinations(const RestoreContext& context, const format::Container& container,
                                     const std::string& path, int version) {
  format::check_identity(container, path, context.store, version, context.rank);
  const std::string where = " (version " + std::to_string(version) + ", " + path + ")";
  std::vector<std::byte*> list;
  for (const format::RegionEntry& entry : container.header.regions) list.push_back(region_for(context, entry, where).data);
  for (const Region& region : context.registry.regions()) {
    const bool held = std::any_of(container.header.regions.begin(), container.header.regions.end(),
                                  [&](const format::RegionEntry& e) { return e.label == region.label; });
    if (!held) throw MismatchError("region '" + region.label + "' is protected but the checkpoint does not hold it" + where);
  }
  return list;
}

// Reads straight into the protected regions; a damaged chunk leaves them
// partly overwritten, which the caller repairs by restoring another copy.
std::uint64_t read_into_regions(const RestoreContext& context, Level& level, int version,
                                std::vector<std::byte>& metadata) {
  TraceSpan span(context.trace, "restore from L" + std::to_string(level.number()), version);
  std::unique_ptr<ReadableFile> file = level.open(version);
  const format::Container container = format::read_container(*file);
  const std::vector<std::byte*> targets = destinations(context, container, file->path(), version);
  context.pool.parallel_for(container.chunks.size(), [&](std::size_t i) {
    thread_local std::vector<std::byte> scratch;
    const format::ChunkRecord& chunk = container.chunks[i];
    format::check_chunk_record(*file, container, chunk);  // one 48-byte read per chunk
    format::read_chunk(*file, container, chunk, targets[chunk.region] + chunk.offset, scratch);
    RESURGO_CRASH_POINT("restore.chunk", level.number());
  });
  metadata = container.header.metadata;
  std::uint64_t bytes = 0;
  for (const format::RegionEntry& entry : container.header.regions) bytes += entry.bytes;
  return bytes;
}

void repair(const RestoreContext& context, const std::vector<Level*>& damaged, Level& intact, int version) {
  for (Level* bad : damaged) {
    try {
      bad->commit_copy(version, *intact.open(version));
      context.log.warn("repaired version " + std::to_string(version) + " at L" + std::to_string(bad->number()) +
                       " from the intact copy at L" + std::to_string(intact.number()));
    } catch (const Error& error) {
      context.log.warn(std::string("could not repair a damaged copy: ") + error.what());
    }
  }
}

// Tries every level holding `version`, fastest first. Only a copy that fails
// its checks (checksum, format, identity) counts as damaged: it is rewritten
// from an intact copy, or quarantined when the caller falls back past it. A
// copy that cannot be read (I/O error) proves nothing about its bytes, so if
// no other copy restores the version, restart fails with that StorageError
// instead of rolling back silently.
bool restore_one(const RestoreContext& context, int version, bool quarantine_if_damaged, RestartReport& report,
                 std::vector<std::byte>& metadata) {
  std::vector<Level*> damaged;
  std::optional<StorageError> unreadable;
  for (Level* level : context.levels) {
    if (!level->holds(version)) continue;
    const Clock::time_point started = Clock::now();
    std::uint64_t bytes = 0;
    try {
      bytes = read_into_regions(context, *level, version, metadata);
    } catch (const NotFoundError&) {
      continue;  // removed since holds(): not a copy any more
    } catch (const MismatchError&) {
      throw;
    } catch (const Error& error) {
      const std::string line = "version " + std::to_string(version) + " at L" + std::to_string(level->number()) +
                               " skipped: " + error.what();
      context.log.warn(line);
      report.skipped.push_back(line);
      if (error.code() == ErrorCode::kStorage) {
        if (!unreadable) unreadable.emplace(error.what());
      } else {
        damaged.push_back(level);
      }
      continue;
    }
    report.version = version;
    report.level = level->number();
    report.bytes = bytes;
    report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    repair(context, damaged, *level, version);
    return true;
  }
  if (unreadable) {
    throw StorageError("restart: version " + std::to_string(version) + " of store '" + context.store +
                       "' could not be read (the protected regions may hold part of it; nothing was quarantined): " +
                       unreadable->what() + "; retry, or restart an older version explicitly");
  }
  if (!quarantine_if_damaged) return false;
  for (Level* bad : damaged) {
    try {
      bad->quarantine(version);
    } catch (const Error& error) {
      context.log.warn(std::string("could not quarantine a damaged copy: ") + error.what());
    }
  }
  return false;
}

}  // namespace

std::map<int, std::vector<int>> committed_versions(const std::vector<Level*>& levels) {
  std::map<int, std::vector<int>> found;
  for (Level* level : levels) {
    for (int version : level->versions()) found[version].push_back(level->number());
  }
  return found;
}

int restore_version(const RestoreContext& context, int version, RestartReport& report,
                    std::vector<std::byte>& metadata) {
  report = RestartReport{};
  std::vector<int> candidates;
  if (version == kLatest) {
    for (const auto& [held, levels] : committed_versions(context.levels)) candidates.insert(candidates.begin(), held);
  } else if (std::any_of(context.levels.begin(), context.levels.end(), [&](Level* l) { return l->holds(version); })) {
    candidates.push_back(version);
  }
  if (candidates.empty()) {
    std::string where;
    for (Level* level : context.levels) where += (where.empty() ? "" : " or ") + level->where();
    throw NotFoundError("restart: store '" + context.store + "' rank " + std::to_string(context.rank) + " has no " +
                        (version == kLatest ? std::string("checkpoint") : "version " + std::to_string(version)) +
                        " in " + where);
  }
  for (int candidate : candidates) {
    if (!restore_one(context, candidate, version == kLatest, report, metadata)) continue;
    if (!report.skipped.empty()) {
      context.log.warn("restarted from version " + std::to_string(candidate) + " after skipping " +
                       std::to_string(report.skipped.size()) + " damaged copies");
    }
    return candidate;
  }
  std::string causes;
  for (const std::string& line : report.skipped) causes += "\n  " + line;
  throw CorruptionError("restart: no intact copy of " + describe(version) + " of store '" + context.store + "':" +
                        causes);
}

}  // namespace resurgo
