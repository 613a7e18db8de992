#include "store/restart_steps.h"

#include <optional>

namespace resurgo {
namespace {

// The device regions of a version the prefetch staged in L0 come from
// there, device to device (store/device_prefetch.h); those of others as the
// capture says.
std::unique_ptr<RestartTargets> restart_targets(const RestartParts& parts, int version) {
  std::unique_ptr<RestartTargets> staged =
      version != kLatest ? parts.prefetcher.restart_targets(parts.registry, version) : nullptr;
  return staged ? std::move(staged) : parts.capture.restart_targets(parts.registry, version);
}

// `table`, when given, holds the region table of the version `fill` read
// once it returned.
Restored restore_into(const RestartParts& parts, int version, const RestoreSteps::Filler& fill,
                      const std::vector<format::RegionEntry>* table = nullptr) {
  if (parts.registry.empty()) {
    throw InvalidArgumentError("restart of store '" + parts.identity.name + "': nothing is protected");
  }
  const std::unique_ptr<RestartTargets> targets = restart_targets(parts, version);
  parts.capture.restarting(true);
  try {
    Restored restored = fill(targets->registry());
    if (table != nullptr) targets->read_table(restored.version, *table);
    restored.report.bytes_from_device_cache = targets->write_back();
    parts.capture.restarting(false);
    return restored;
  } catch (...) {
    parts.capture.restarting(false);
    throw;
  }
}

// What restart chose and why: the version asked for, the one read, from
// which level, along which chain, past which damaged copies.
void log_choice(const Logger& log, int asked, const RestartReport& report) {
  if (!log.enabled(LogLevel::kDebug)) return;
  std::string chain;
  for (const int link : report.chain) chain += (chain.empty() ? "" : " <- ") + std::to_string(link);
  const std::string which = asked == kLatest ? "the newest version" : "version " + std::to_string(asked);
  log.debug("restart of " + which + ": version " + std::to_string(report.version) + " read from L" +
            std::to_string(report.level) + " (chain " + chain + ")");
  for (const std::string& skipped : report.skipped) log.debug("restart skipped " + skipped);
}

// A version the prefetcher failed to bring into memory is read from a
// slower level; the report says so.
Restored restore_from_levels(const RestartParts& parts, int version, RestartScope scope) {
  const std::optional<std::string> prefetch_failure =
      version != kLatest ? parts.prefetcher.settle(version) : std::nullopt;
  std::vector<format::RegionEntry> table;
  const auto fill = [&](const Registry& targets) {
    Restored read;
    const std::vector<Level*> levels = parts.route.readable();
    const RestoreContext context{parts.identity, parts.rank,  levels, targets, parts.pool,
                                 parts.log,      parts.trace, scope,  &table};
    read.version = restore_version(context, version, read.report, read.metadata);
    return read;
  };
  Restored restored = restore_into(parts, version, fill, &table);
  parts.prefetcher.restored(restored.version);
  if (prefetch_failure) {
    restored.report.skipped.push_back("version " + std::to_string(version) + ": " + *prefetch_failure +
                                      "; read from L" + std::to_string(restored.report.level) + " instead");
  }
  log_choice(parts.log, version, restored.report);
  return restored;
}

// The copy in the capture's buffer of a version its first level still
// writes (Scheduler::read_in_flight): the restart's regions filled from it
// as restore_into fills them from the levels.
std::optional<Restored> restore_from_buffer(const RestartParts& parts, int version, RestartScope scope) {
  std::optional<Restored> restored;
  const auto read = [&](const format::Header& header, const std::vector<Extent>& extents) {
    const auto fill = [&](const Registry& targets) {
      Restored copied;
      const std::vector<Level*> no_levels;
      const RestoreContext context{parts.identity, parts.rank,  no_levels, targets, parts.pool,
                                   parts.log,      parts.trace, scope};
      restore_in_flight(context, version, header, extents, copied.report);
      copied.version = version;
      copied.metadata = header.metadata;
      return copied;
    };
    restored = restore_into(parts, version, fill, &header.regions);
  };
  if (!parts.scheduler.read_in_flight(version, read)) return std::nullopt;
  parts.prefetcher.restored(version);
  log_choice(parts.log, version, restored->report);
  return restored;
}

}  // namespace

// A restore from the levels says which regions it wrote when it fails
// (restore.cpp). One from elsewhere writes them region by region and cannot
// tell how far it came: its errors say that any of them may have been
// written.
RestoreSteps restart_steps(const RestartParts& parts, RestartScope scope) {
  RestoreSteps steps;
  steps.from_levels = [parts, scope](int version) { return restore_from_levels(parts, version, scope); };
  steps.from_buffer = [parts, scope](int version) { return restore_from_buffer(parts, version, scope); };
  steps.into_regions = [parts](const RestoreSteps::Filler& fill) {
    try {
      return restore_into(parts, kLatest, fill);
    } catch (const Error& error) {
      rethrow_as_is(Error(error.code(), std::string(error.what()) +
                                            " (the protected regions may have been partly overwritten: a restart "
                                            "on another number of ranks writes them region by region)"));
    }
  };
  return steps;
}

}  // namespace resurgo
