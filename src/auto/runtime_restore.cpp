// Restore mode of the automatic runtime (Algorithm 2 of the OPS paper): the
// newest checkpoint's control part is read at attach; loops are skipped and
// queries answered from its log until its loop (or, with a payload, until
// the location call), where its datasets are read into their memory.
#include <cstring>
#include <exception>

#include "auto/runtime_impl.h"

namespace resurgo::autockpt {

namespace {

// How one rank's step of reading a version ended; the ranks take the worst.
enum Attempt : long { kRead = 0, kSkipped = 1, kFailed = 2 };

// A version that cannot be read for these reasons is skipped for the one
// before; other errors (a store the runtime did not write) are the caller's.
bool skippable(const Error& error) {
  return error.code() == ErrorCode::kCorrupt || error.code() == ErrorCode::kStorage;
}

}  // namespace

// The newest automatic checkpoint whose control part (record, query log,
// payload) reads intact; its datasets are read at the restore point, once
// the application declared them.
void Runtime::Impl::attach_restore(const std::vector<VersionInfo>& versions) {
  if (agreement_.alone()) {
    for (auto version = versions.rbegin(); version != versions.rend(); ++version) {
      if (!version->pending && read_version(version->version)) break;
    }
  } else {
    attach_restore_together(versions);
  }
  if (!restore_) return;
  // The store's buffer for the next checkpoints is made now, and faulted in
  // while the initialisation and the replay run, not during the restore
  // point's read.
  std::uint64_t total = 0;
  for (const RegionDescription& region : restore_->regions) total += region.bytes;
  store_.reserve(total);
  store_buffer_sized_ = true;
}

// Every rank of a job restores the same version: the newest the job
// committed (latest(), from the job manifests: a version some rank holds
// but the job never completed does not count), else, when its control part
// cannot be read on some rank, the newest below it that every rank holds.
void Runtime::Impl::attach_restore_together(const std::vector<VersionInfo>& versions) {
  std::vector<long> held;
  for (const VersionInfo& version : versions) {
    if (!version.pending) held.push_back(version.version);
  }
  const std::optional<int> latest = store_.latest();
  long candidate = latest ? *latest : -1;
  while (candidate >= 0 && !read_version_together(static_cast<int>(candidate))) {
    candidate = agreement_.newest_everywhere(held, candidate);
  }
}

bool Runtime::Impl::read_version(int version) {
  const std::string what = "version " + std::to_string(version) + " of " + store_what_;
  const Clock::time_point started = Clock::now();
  Restore restore;
  restore.version = version;
  try {
    read_record(restore, what);
    read_control(restore, what);
  } catch (const Error& error) {
    unprotect_all();
    if (!skippable(error)) throw;
    report(0, "skipping " + what + ": " + error.what());
    return false;
  }
  adopt(std::move(restore), started);
  return true;
}

// As read_version, in two steps that every rank ends before the next, so
// that no rank enters the store's collective restart while another gave up
// on the version: its record and region table (this rank's file alone),
// then its control part (the store's restart of the version, collective).
// A version some rank lacks or cannot read is skipped by all; an error that
// is not the version's (a store the runtime did not write) stops every rank.
bool Runtime::Impl::read_version_together(int version) {
  const std::string what = "version " + std::to_string(version) + " of " + store_what_;
  const Clock::time_point started = Clock::now();
  Restore restore;
  restore.version = version;
  const auto attempt = [&](bool collective, auto&& step) {
    std::string why = "another rank cannot read it";
    std::exception_ptr failure;
    long outcome = kRead;
    try {
      step();
    } catch (const Error& error) {
      unprotect_all();
      why = error.what();
      failure = std::current_exception();
      // After the store's collective restart, the ranks whose own copy was
      // intact are told that another rank's was not (StateError).
      const bool skip = skippable(error) || error.code() == ErrorCode::kNotFound ||
                        (collective && error.code() == ErrorCode::kState);
      outcome = skip ? kSkipped : kFailed;
    }
    const long worst = agreement_.largest(outcome);
    if (worst == kFailed) {
      if (outcome == kFailed) std::rethrow_exception(failure);
      throw StateError("restore of " + what + ": another rank failed to read it (its error says why); every rank "
                       "stops");
    }
    if (worst == kSkipped) report(0, "skipping " + what + ": " + why);
    return worst == kRead;
  };
  // Rank 0's record says which rank count wrote the version: a job of
  // another count has no files of its own to describe it from.
  if (!attempt(false, [&] { if (agreement_.rank() == 0) read_record(restore, what); })) return false;
  share_record(restore, what);
  refuse_unmappable(restore, what);
  if (other_rank_count(restore.record)) {
    restore.regions.clear();
    const CheckpointRecord& record = restore.record;
    restore.regions.push_back({0, kQueryLogLabel, record.query_log_bytes, {}});
    if (record.payload_bytes > 0) restore.regions.push_back({0, kPayloadLabel, record.payload_bytes, {}});
    for (const std::string& label : record.saved) restore.regions.push_back({0, label, 0, {}});
  } else if (!attempt(false, [&] { if (agreement_.rank() != 0) read_record(restore, what); })) {
    return false;
  }
  if (!attempt(true, [&] { read_control(restore, what); })) return false;
  adopt(std::move(restore), started);
  return true;
}

// The version's control record and region table (its chunks are not read).
void Runtime::Impl::read_record(Restore& restore, const std::string& what) {
  VersionDescription description = store_.describe(restore.version);
  const std::optional<CheckpointRecord> record = decode(description.metadata, what);
  if (!record) {
    throw StateError(what + " was not written by the automatic runtime; give the runtime a store of its own");
  }
  restore.record = *record;
  restore.regions = std::move(description.regions);
}

void Runtime::Impl::share_record(Restore& restore, const std::string& what) {
  std::string mine;
  if (agreement_.rank() == 0) {
    const std::vector<std::byte> encoded = encode(restore.record);
    mine.assign(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  }
  const std::string shared = agreement_.rank_zeros(mine);
  restore.record = decode(std::as_bytes(std::span(shared)), what).value();
}

// A version of datasets that were not all global blocks, written by
// another rank count, cannot be restored here, nor (the versions must
// increase) can this job start from scratch beside it: every rank refuses,
// as the store's latest() does for its own regions.
void Runtime::Impl::refuse_unmappable(const Restore& restore, const std::string& what) const {
  const CheckpointRecord& record = restore.record;
  if (!other_rank_count(record) || record.global) return;
  throw StateError("restore of " + what + ": it was written by " + std::to_string(record.ranks) +
                   " ranks whose datasets were not all declared as blocks of global arrays, so it restarts only on " +
                   std::to_string(record.ranks) + " ranks, not on " + std::to_string(agreement_.ranks()) +
                   "; restart on " + std::to_string(record.ranks) + " ranks (and declare every dataset with its "
                   "global shape and offset for the next checkpoints), or remove the versions with resurgo rm");
}

void Runtime::Impl::adopt(Restore restore, Clock::time_point started) {
  restore.skipping = !restore.record.has_payload && !restore.record.init_end;
  restore.read_seconds = seconds_since(started);
  restore.replay_start = Clock::now();
  restore_ = std::move(restore);
  report(1, "restoring version " + std::to_string(restore_->version) + " of " + store_what_ + ": taken before loop " +
                std::to_string(restore_->record.loop_index) + " ('" + restore_->record.location + "')" +
                (other_rank_count(restore_->record)
                     ? " by " + std::to_string(restore_->record.ranks) + " ranks, restored on " +
                           std::to_string(agreement_.ranks())
                     : ""));
}

// Reads the query log and the payload of the version now: the replay needs
// them from the first loop. The datasets are read at the restore point,
// straight into their memory (restore_datasets).
void Runtime::Impl::read_control(Restore& restore, const std::string& what) {
  std::vector<std::byte> log;
  std::vector<Piece> pieces;
  for (const RegionDescription& region : restore.regions) {
    std::vector<std::byte>* into = region.label == kQueryLogLabel ? &log
                                   : region.label == kPayloadLabel ? &restore.payload
                                                                   : nullptr;
    if (into == nullptr) continue;
    into->resize(region.bytes);
    // A global row: this rank's on the rank count that wrote it, else rank 0's.
    const int row = other_rank_count(restore.record) ? 0 : agreement_.rank();
    pieces.push_back(restore.record.global ? control_piece(region.label, into->data(), region.bytes,
                                                           restore.record.ranks, row)
                                           : Piece{region.label, into->data(), region.bytes, region.type, {}});
  }
  if (log.empty()) throw CorruptionError(what + " holds no query log region '" + kQueryLogLabel + "'");
  protect_exactly(std::move(pieces));
  store_.restart(restore.version, RestartScope::kProtectedRegions);
  unprotect_all();
  restore.replay.emplace(std::move(log), what);
}

bool Runtime::Impl::replay_loop(std::string_view name) {
  Restore& restore = *restore_;
  if (!restore.skipping) return true;  // the initialisation, or the way to a payload's location
  const CheckpointRecord& record = restore.record;
  if (loop_index_ == record.loop_index && record.kind == CheckpointKind::kRegion) {
    finish_restore(name, nullptr, 0);
    return true;
  }
  if (loop_index_ > record.loop_index) {  // a datlist checkpoint follows its loop
    throw MismatchError("replay diverged: loop " + std::to_string(loop_index_) + " '" + std::string(name) +
                        "' is past the point of version " + std::to_string(restore.version) + " (" +
                        record.location + " at loop " + std::to_string(record.loop_index) + ") without reaching it");
  }
  ++restore.skipped;
  return false;
}

void Runtime::Impl::finish_restore(std::string_view where, void* payload, std::size_t payload_bytes) {
  Restore& restore = *restore_;
  const CheckpointRecord& record = restore.record;
  const std::string at = " at loop " + std::to_string(loop_index_) + " '" + std::string(where) + "'";
  if (restore.skipping) {
    if (sequence_hash_ != record.sequence_hash) {
      throw MismatchError("replay diverged: reached the point of version " + std::to_string(restore.version) + at +
                          " after another sequence of loops than the run that wrote it");
    }
    if (restore.replay->replayed() != restore.replay->count()) {
      throw MismatchError("replay diverged: reached the point of version " + std::to_string(restore.version) + at +
                          " having asked " + std::to_string(restore.replay->replayed()) + " queries of the " +
                          std::to_string(restore.replay->count()) + " the run that wrote it asked");
    }
  }
  if (restore.record.has_payload && restore.payload.size() != payload_bytes) {
    throw MismatchError("the payload of version " + std::to_string(restore.version) + " has " +
                        std::to_string(restore.payload.size()) + " bytes but " + std::string(where) + " was given " +
                        std::to_string(payload_bytes));
  }
  const double replay_seconds = seconds_since(restore.replay_start);
  const Clock::time_point read_started = Clock::now();
  restore_datasets();
  if (payload_bytes > 0) std::memcpy(payload, restore.payload.data(), payload_bytes);
  RestoreReport done{restore.version, loop_index_,    restore.skipped, restore.replay->replayed(), !restore.skipping,
                     restore.read_seconds + seconds_since(read_started), replay_seconds,
                     static_cast<int>(record.ranks)};
  if (restore.skipping) {
    log_.assign(restore.replay->release(), done.replayed_queries, restore.replay->last_loop_index());
  } else {
    log_.clear();
  }
  location_ = record.kind == CheckpointKind::kRegion ? record.location : "";
  location_chosen_ = record.kind == CheckpointKind::kRegion;
  user_location_ = record.kind != CheckpointKind::kRegion;
  last_checkpoint_loop_ = loop_index_;
  last_checkpoint_time_ = Clock::now();
  last_restore_ = done;
  restore_.reset();
  report(1, "restored version " + std::to_string(done.version) + at + " (" + std::to_string(done.skipped_loops) +
                " loops skipped, " + std::to_string(done.replayed_queries) + " queries replayed)");
}

// Reads the version's datasets straight into their memory (halo rings
// through a packed buffer). A version damaged on every level is discarded,
// so that the next run falls back to the one before.
// MismatchError unless `dataset` can take the version's `region` (its halo
// ring when `ring`): the same bytes on this rank count, a block of a global
// array on another one.
void Runtime::Impl::check_restorable(const RegionDescription& region, const Dataset& dataset, bool ring,
                                     const std::string& version) const {
  const CheckpointRecord& record = restore_->record;
  if (other_rank_count(record)) {
    if (dataset.global()) return;
    throw MismatchError(version + " was written by " + std::to_string(record.ranks) + " ranks and holds dataset '" +
                        dataset.name + "', which this run of " + std::to_string(agreement_.ranks()) +
                        " ranks did not declare as a block of a global array; declare it with its global shape and "
                        "this rank's offset, or restart on " + std::to_string(record.ranks) + " ranks");
  }
  const std::uint64_t expected = ring ? (dataset.ring ? dataset.ring->bytes() : 0) : dataset.bytes;
  if (region.bytes == expected) return;
  throw MismatchError(version + " holds " + std::to_string(region.bytes) + " bytes of '" + region.label +
                      "' but dataset '" + dataset.name + "' has " + std::to_string(expected) +
                      (ring ? " bytes of halo ring" : " bytes"));
}

void Runtime::Impl::restore_datasets() {
  const Restore& restore = *restore_;
  check_blocks("restore of version " + std::to_string(restore.version));
  const std::string version = "version " + std::to_string(restore.version);
  std::vector<Piece> pieces;
  std::vector<std::pair<const Dataset*, std::vector<std::byte>>> rings;
  rings.reserve(restore.regions.size());
  std::vector<std::pair<int, bool>> restored;  // dataset id, ring only
  for (const RegionDescription& region : restore.regions) {
    const std::string& label = region.label;
    if (label == kQueryLogLabel || label == kPayloadLabel) continue;
    const bool ring = label.ends_with(kRingSuffix);
    const std::string name = ring ? label.substr(0, label.size() - std::strlen(kRingSuffix)) : label;
    const int id = datasets_.find(name);
    if (id < 0) {
      throw MismatchError(version + " holds dataset '" + name +
                          "', which this run did not declare; declare the same datasets as the run that wrote it");
    }
    const Dataset& dataset = datasets_[id];
    check_restorable(region, dataset, ring, version);
    std::byte* into = dataset.data;
    if (ring) into = rings.emplace_back(&dataset, std::vector<std::byte>(region.bytes)).second.data();
    restored.emplace_back(id, ring);
    // On another rank count the region table is not this rank's: the dataset says.
    const bool other_count = other_rank_count(restore.record);
    pieces.push_back(ring ? Piece{label, into, region.bytes, region.type, {}}
                          : Piece{label, into, other_count ? dataset.bytes : region.bytes,
                                  other_count ? dataset.type : region.type, dataset.block});
  }
  if (pieces.empty()) return;  // checkpointed before any loop wrote a dataset: nothing to read
  std::lock_guard lock(store_mutex_);
  protect_exactly(std::move(pieces));
  try {
    store_.restart(restore.version, RestartScope::kProtectedRegions);
  } catch (const CorruptionError& error) {
    store_.discard(restore.version);
    throw CorruptionError(std::string(error.what()) + "; " + version +
                          " was discarded: run the application again to restore the checkpoint before it");
  }
  for (const auto& [dataset, packed] : rings) dataset->ring->unpack(packed.data(), dataset->data);
  // What was restored was written before the checkpoint: later regions must
  // save it too (after a fast-forward no replayed loop marked it).
  for (const auto& [id, ring] : restored) {
    Dataset& dataset = datasets_[id];
    for (int part = 0; part < dataset.parts(); ++part) {
      if (!ring || part == kRingPart) dataset.ever_written[part] = true;
    }
  }
}

}  // namespace resurgo::autockpt
