#include "job/collective_job.h"

#include <algorithm>
#include <exception>

#include "format/container.h"
#include "format/file_names.h"
#include "job/partner_topology.h"
#include "job/redistribution.h"
#include "resurgo/errors.hpp"

namespace resurgo {

CollectiveJob::CollectiveJob(const JobContext& context) : context_(context), local_(context) {
  const Config& config = context.config;
  context.route.local().set_collective();
  context.route.persistent().set_collective();
  versions_ = std::make_unique<CollectiveVersions>(context.comm, context.node, context.store,
                                                   context.route.identity().hex(), hooks(), context.log,
                                                   config.mpi.timeout);
  if (config.persistent.layout == FileLayout::kShared) {
    context.route.persistent().set_shared_layout();
    versions_->write_shared_files();
  }
  if (config.partner.scheme == PartnerScheme::kNone) return;
  partner_ = std::make_unique<PartnerCopies>(
      config.partner.scheme, PartnerTopology(versions_->nodes(), config.partner.set_size), context.comm.rank(),
      context.store, context.route.local(), config.local.mode, config.local.keep, config.pipeline.chunk_size,
      context.env, context.log);
  context.route.add_partner(partner_->level());
  if (!PartnerMemory::wanted(config, context.comm.size())) return;
  partner_memory_ = std::make_unique<PartnerMemory>(
      PartnerTopology(versions_->nodes(), config.partner.set_size), context.comm.rank(), context.route.local().dir(),
      context.route.memory(), config.memory.keep, config.mpi.timeout, context.env, context.log);
  partner_memory_->recover(context.comm);
}

CollectiveJob::~CollectiveJob() = default;

// The job's steps ask the catalog (or, for a version it no longer keeps,
// the level itself) how this rank's copy fares.
CollectiveVersions::Hooks CollectiveJob::hooks() {
  CollectiveVersions::Hooks hooks;
  hooks.outcome = [this](int version, int level) {
    if (const std::optional<int> known = context_.catalog.outcome(version, level)) return *known;
    return context_.route.level(level)->holds(version) ? 1 : -1;
  };
  hooks.settle = [this](int version, int level) { context_.catalog.wait_settled(version, level); };
  hooks.complete_at_local = [this](int version, Clock::time_point started, Comm& job) {
    if (partner_) partner_->protect(version, started, job);
  };
  hooks.in_memory = [this](int version, Comm& job) {
    if (!partner_memory_) return;
    context_.catalog.wait_settled(version, kL1);
    partner_memory_->replicate(version, context_.catalog.outcome(version, kL1) == 1, job);
  };
  return hooks;
}

// ------------------------------------------------------------ checkpoint

void CollectiveJob::before_checkpoint(int version) {
  versions_->report_failure("checkpoint " + std::to_string(version) +
                            " not taken: an earlier version failed for the job (the store keeps working; call "
                            "checkpoint again): ");
}

// The job takes a step for every checkpoint() call, taken or not, so that
// the ranks' steps match.
void CollectiveJob::checkpoint_failed(int version) { versions_->add_failed(version); }

void CollectiveJob::checkpointed(int version, Clock::time_point started, const std::vector<Level*>& route) {
  std::vector<format::ManifestRegion> layout;
  for (const Region& region : context_.registry.regions()) {
    layout.push_back({context_.comm.rank(), region.id, region.label, region.type.dtype, region.bytes,
                      region.type.shape, region.block.global_shape, region.block.offset});
  }
  std::vector<DirectoryLevel*> directories;
  for (Level* level : route) {
    if (DirectoryLevel* directory = context_.route.directory(level)) directories.push_back(directory);
  }
  versions_->add(version, started, std::move(directories), std::move(layout));
}

// ------------------------------------------------------------ wait, latest

void CollectiveJob::drain(const std::string& call, int level) {
  versions_->drain(level == kL4);
  versions_->report_failure(call);
}

void CollectiveJob::wait(int version, int level) {
  if (level == kL3) return wait_for_partner_copies(version);
  drain("wait: ", level);
  local_.wait(version, level);
  const bool failed =
      version == kAllVersions ? versions_->take_failures(level) : versions_->failed(version, level);
  if (!failed) return;
  throw StorageError("wait: " + (version == kAllVersions ? std::string("a version") : "version " + std::to_string(version)) +
                     " of store '" + context_.store + "' did not reach L" + std::to_string(level) +
                     " on every rank; the ranks where it failed say why");
}

// wait(v, 3): the job's L2 step for the version (which protects it on L3)
// has run; every rank learns whether every rank's protection succeeded.
void CollectiveJob::wait_for_partner_copies(int version) {
  drain("wait: ", kL2);
  std::vector<int> versions{version};
  if (version == kAllVersions) {
    versions.clear();
    for (const VersionStats& stats : context_.catalog.stats()) versions.push_back(stats.version);
  }
  std::string failure;
  for (int each : versions) {
    const std::optional<PartnerCopies::Outcome> outcome = partner_->outcome(each);
    if (!outcome && version != kAllVersions) {
      failure = "version " + std::to_string(each) + " was not protected on L3 (it is not complete on L2 for the job)";
    } else if (outcome && !outcome->error.empty()) {
      failure = "version " + std::to_string(each) + ": " + outcome->error;
    }
  }
  if (versions_->on_every_rank(failure.empty())) return;
  throw StorageError("wait: L3 of store '" + context_.store + "': " +
                     (failure.empty() ? std::string("another rank's protection failed (its error says why)") : failure));
}

std::optional<int> CollectiveJob::latest() {
  drain("latest: ", kL4);
  const Survey held = survey();
  const int agreed = versions_->agree_newest(held.found());
  if (agreed >= 0) return agreed;
  refuse_lost_memory("latest on");
  // Only interrupted commits, if anything: the job starts from scratch.
  if (held.newest_committed < 0) return std::nullopt;
  throw StateError(no_version("latest on", kLatest, held.skipped) +
                   "; restart on the number of ranks that wrote them, with the regions they hold, or remove them "
                   "(`resurgo rm`) to start again");
}

CopyOwner CollectiveJob::owner() const {
  return {context_.store, context_.route.identity(), context_.comm.rank(), context_.config.restart.accept_foreign};
}

// Restorable when a directory level holds its manifest for this job size
// and this rank's copy is the file the manifest names (same header+index
// checksum), its chain intact as far as headers and indexes tell; or, for
// a version complete in partner memory, when its copy in L1 is intact.
CollectiveJob::Standing CollectiveJob::standing_of(int version) {
  if (partner_memory_ && partner_memory_->complete(version)) {
    return {true, 0, restore_problem(context_.route.readable(), owner(), version)};
  }
  Standing standing{false, 0, "no job manifest (the job did not commit it: a rank failed before every rank had "
                              "written it)"};
  for (DirectoryLevel* directory : context_.route.directories()) {
    try {
      const std::optional<std::string> text = directory->read_manifest(version);
      if (!text) continue;
      standing.committed = true;
      const std::string path = directory->dir() + "/" + format::manifest_file_name(version);
      const format::Manifest manifest = format::decode_manifest(*text, path);
      check_store(manifest, path);
      if (manifest.ranks != context_.comm.size()) return {true, manifest.ranks, ""};
      const std::uint64_t expected = manifest.files[static_cast<std::size_t>(context_.comm.rank())].checksum;
      standing.problem = restore_problem(context_.route.readable(), owner(), version, expected);
      if (standing.problem.empty()) return standing;
    } catch (const Error& error) {
      standing.problem = error.what();
    }
  }
  return standing;
}

void CollectiveJob::check_store(const format::Manifest& manifest, const std::string& path) const {
  if (context_.config.restart.accept_foreign || manifest.store_id == context_.route.identity().hex()) return;
  throw MismatchError("job manifest '" + path + "' was written by another store (identity " +
                      (manifest.store_id.empty() ? std::string("unknown") : manifest.store_id) +
                      ", this store's is " + context_.route.identity().hex() +
                      "); set restart.accept_foreign = true to restart from a copy of another run's checkpoint");
}

std::vector<int> CollectiveJob::Survey::found() const {
  std::vector<int> versions = restorable;
  for (const auto& [version, manifest] : other_rank_count) versions.push_back(version);
  return versions;
}

CollectiveJob::Survey CollectiveJob::survey() {
  Survey held;
  held.newest_committed = versions_->agree_newest(manifest_versions());
  survey_own_versions(held);
  survey_other_rank_counts(held);
  return held;
}

std::vector<int> CollectiveJob::manifest_versions() {
  std::vector<int> versions = partner_memory_ ? partner_memory_->complete() : std::vector<int>{};
  for (DirectoryLevel* directory : context_.route.directories()) {
    for (int version : directory->manifest_versions()) {
      if (!context_.catalog.discarded(version)) versions.push_back(version);
    }
  }
  return versions;
}

// A version of another rank count is judged from its L4 manifest
// (survey_other_rank_counts); one only on this node's L2 cannot be.
void CollectiveJob::survey_own_versions(Survey& held) {
  const std::vector<int> l4_manifests = context_.route.persistent().manifest_versions();
  for (const auto& [version, levels] : committed_versions(context_.route.readable())) {
    if (context_.catalog.discarded(version)) continue;
    const Standing standing = standing_of(version);
    if (!standing.committed || version > held.newest_committed) held.orphans.push_back(version);
    const std::string subject =
        "version " + std::to_string(version) + " (rank " + std::to_string(context_.comm.rank()) + "): ";
    if (standing.other_ranks > 0) {
      if (std::find(l4_manifests.begin(), l4_manifests.end(), version) != l4_manifests.end()) continue;
      held.skipped.push_back(subject + "written by " + std::to_string(standing.other_ranks) + " ranks and not on L4, "
                             "where a restart on another number of ranks reads it");
    } else if (standing.problem.empty()) {
      held.restorable.push_back(version);
    } else {
      held.skipped.push_back(subject + standing.problem);
    }
  }
}

// Versions whose L4 manifest names another rank count and whose regions
// hold every region protected here as a block of the same global array.
void CollectiveJob::survey_other_rank_counts(Survey& held) {
  const std::vector<DirectoryLevel*> directories = context_.route.directories();
  DirectoryLevel& persistent = context_.route.persistent();
  if (std::find(directories.begin(), directories.end(), &persistent) == directories.end()) return;
  for (int version : persistent.manifest_versions()) {
    if (context_.catalog.discarded(version)) continue;
    const std::string path = persistent.dir() + "/" + format::manifest_file_name(version);
    try {
      const std::optional<std::string> text = persistent.read_manifest(version);
      if (!text) continue;
      format::Manifest manifest = format::decode_manifest(*text, path);
      check_store(manifest, path);
      if (manifest.ranks == context_.comm.size()) continue;  // a version of this rank count: survey_own_versions()
      const std::string problem = redistribution_problem(manifest, context_.registry.regions());
      if (problem.empty()) {
        held.other_rank_count.emplace(version, std::move(manifest));
      } else {
        held.skipped.push_back("version " + std::to_string(version) + " (written by " + std::to_string(manifest.ranks) +
                               " ranks): " + problem);
      }
    } catch (const Error& error) {
      held.skipped.push_back("version " + std::to_string(version) + ": " + error.what());
    }
  }
}

// ------------------------------------------------------------ restart

Restored CollectiveJob::restart(int version, const RestoreSteps& steps) {
  context_.scheduler.drain();
  drain("restart: ", kL4);
  PartnerCopies::Rebuild rebuild;
  if (partner_) rebuild = partner_->rebuild(context_.comm);
  if (context_.comm.rank() == 0) {
    for (const std::string& note : rebuild.notes) context_.log.warn(note);
  }
  Survey held = survey();
  std::vector<int> found = held.found();
  if (version != kLatest) found.assign(std::count(found.begin(), found.end(), version), version);
  for (;;) {
    const int agreed = versions_->agree_newest(found);
    if (agreed < 0) {
      refuse_lost_memory("restart of");
      throw NotFoundError(no_version("restart of", version, held.skipped));
    }
    std::exception_ptr failure;
    std::string cause = "another rank could not restore it";
    Restored restored;
    try {
      restored = restore(agreed, held.other_rank_count, steps);
    } catch (const std::exception& error) {
      failure = std::current_exception();
      cause = error.what();
    }
    if (versions_->on_every_rank(!failure)) {
      restored.report.skipped.insert(restored.report.skipped.begin(), held.skipped.begin(), held.skipped.end());
      restored.report.rebuilt = rebuild.notes;
      if (partner_memory_ && partner_memory_->recovery().version == agreed) {
        const std::vector<std::string>& notes = partner_memory_->recovery().notes;
        restored.report.rebuilt.insert(restored.report.rebuilt.end(), notes.begin(), notes.end());
      }
      restored.report.rebuild_seconds = rebuild.seconds;
      if (version == kLatest) clear_newer(agreed, held.orphans);
      return restored;
    }
    if (version != kLatest) {
      if (failure) std::rethrow_exception(failure);
      throw StateError("restart of store '" + context_.store + "': version " + std::to_string(version) +
                       " could not be restored on every rank (" + cause + ")");
    }
    held.skipped.push_back("version " + std::to_string(agreed) + ": not restorable on every rank (" + cause + ")");
    found.erase(std::remove(found.begin(), found.end(), agreed), found.end());
  }
}

std::string CollectiveJob::no_version(const std::string& call, int version,
                                      const std::vector<std::string>& skipped) const {
  std::string why;
  for (const std::string& line : skipped) why += "; " + line;
  return call + " store '" + context_.store + "': " +
         (version == kLatest ? std::string("no version") : "version " + std::to_string(version) + " is not one") +
         " that every rank of the job can restore" + why;
}

void CollectiveJob::refuse_lost_memory(const std::string& call) const {
  if (!partner_memory_ || partner_memory_->recovery().lost.empty()) return;
  throw StateError(call + " store '" + context_.store + "': the versions kept in partner memory cannot be restored (" +
                   partner_memory_->recovery().lost + ") and the job holds no version on L2 or L4; restart on the "
                   "nodes that kept them, or remove the store's partner memory on every node (on this one " +
                   PartnerMemory::directory_for(context_.route.local().dir()) + ") to start again");
}

// Every rank restored `restored`, and could restore no newer version of
// the job: the newer ones (the files of a run that died part way through a
// version, a version damaged or incomplete on some rank) must not count as
// held on any rank, or the job's next checkpoints, which take their
// numbers, would fail on the ranks holding them. Every rank has surveyed
// the manifests before any rank gets here (the restart's last collective
// follows every survey). Their manifests go first: a crash part way then
// leaves files no manifest names, which the next restart clears, never a
// manifest naming files set aside (a level keeps every version from the
// newest manifest on). The files the job never committed are removed, the
// others set aside for inspection, and their L3 copies removed. A failure
// here is logged: the restart itself succeeded on every rank.
void CollectiveJob::clear_newer(int restored, const std::vector<int>& orphans) {
  try {
    for (DirectoryLevel* directory : context_.route.directories()) {
      for (int version : directory->manifest_versions()) {
        if (version > restored) directory->remove_manifest(version);
      }
    }
    const std::vector<Level*> levels = context_.route.readable();
    for (int orphan : orphans) {
      for (Level* level : levels) {
        if (orphan > restored && level->holds(orphan)) level->remove(orphan);
      }
    }
    for (int version : set_aside_newer(levels, restored)) {
      context_.log.warn("version " + std::to_string(version) + " of store '" + context_.store +
                        "' set aside (its copies renamed *" + format::kDamagedSuffix +
                        "): the job restarted from version " + std::to_string(restored) +
                        ", since not every rank could restore it");
    }
    for (int version : partner_ ? partner_->level().versions() : std::vector<int>{}) {
      if (version > restored) partner_->level().remove(version);
    }
  } catch (const Error& error) {
    context_.log.error("restart of store '" + context_.store + "' restored version " + std::to_string(restored) +
                       " but could not clear this rank's newer versions: " + error.what() +
                       "; a checkpoint of their numbers fails on this rank until they are removed (`resurgo rm`)");
  }
}

Restored CollectiveJob::restore(int version, const std::map<int, format::Manifest>& other_rank_count,
                                const RestoreSteps& steps) {
  const auto written_by_others = other_rank_count.find(version);
  if (written_by_others == other_rank_count.end()) return steps.from_levels(version);
  return redistribute(written_by_others->second, steps);
}

Restored CollectiveJob::redistribute(const format::Manifest& manifest, const RestoreSteps& steps) {
  const Clock::time_point started = Clock::now();
  return steps.into_regions([&](const Registry& targets) {
    const RedistributionReport report =
        resurgo::redistribute(manifest, context_.route.persistent(), targets.regions());
    Restored restored;
    restored.version = manifest.version;
    restored.metadata = report.metadata;
    restored.report.version = manifest.version;
    restored.report.level = kL4;
    restored.report.seconds = seconds_since(started);
    restored.report.bytes = report.bytes_restored;
    restored.report.bytes_read = report.bytes_read;
    restored.report.written_by_ranks = manifest.ranks;
    restored.report.chain = {manifest.version};
    return restored;
  });
}

// ------------------------------------------------------------ stats, close

void CollectiveJob::add_stats(std::vector<VersionStats>& stats) {
  if (!partner_) return;
  for (VersionStats& version : stats) {
    const std::optional<PartnerCopies::Outcome> outcome = partner_->outcome(version.version);
    if (!outcome) continue;
    LevelStats level{kL3, outcome->error.empty() ? outcome->seconds_to_level : -1, outcome->stored_bytes,
                     outcome->write_seconds};
    version.levels.insert(std::find_if(version.levels.begin(), version.levels.end(),
                                       [](const LevelStats& other) { return other.level > kL3; }),
                          level);
    if (!outcome->error.empty() && version.error.empty()) version.error = "L3: " + outcome->error;
  }
}

// The job's thread stops whether or not the last steps failed.
void CollectiveJob::close() {
  std::exception_ptr failure;
  try {
    drain("store closed, but ", kL4);
    context_.scheduler.request_eviction();  // the manifests just written free older versions
  } catch (...) {
    failure = std::current_exception();
  }
  versions_.reset();
  if (partner_memory_) partner_memory_->close();  // a job that ends keeps no memory of its versions
  if (failure) std::rethrow_exception(failure);
}

}  // namespace resurgo
