// Restore mode of the automatic runtime (Algorithm 2 of the OPS paper): the
// newest checkpoint's control part is read at attach; loops are skipped and
// queries answered from its log until its loop (or, with a payload, until
// the location call), where its datasets are read into their memory.
#include <cstring>

#include "auto/runtime_impl.h"

namespace resurgo::autockpt {

// The newest automatic checkpoint whose control part (record, query log,
// payload) reads intact; its datasets are read at the restore point, once
// the application declared them.
void Runtime::Impl::attach_restore(const std::vector<VersionInfo>& versions) {
  for (auto version = versions.rbegin(); version != versions.rend(); ++version) {
    if (!version->pending && read_version(version->version)) break;
  }
  // Every rank restores the same version: the newest all of them can read.
  const int mine = restore_ ? restore_->version : -1;
  const auto agreed = static_cast<int>(agreement_.smallest(mine));
  if (agreed != mine) {
    restore_.reset();
    if (agreed >= 0 && !read_version(agreed)) {
      throw CorruptionError("version " + std::to_string(agreed) + " of " + store_what_ +
                            ", the newest every rank holds, cannot be read on this rank");
    }
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

bool Runtime::Impl::read_version(int version) {
  const std::string what = "version " + std::to_string(version) + " of " + store_what_;
  const Clock::time_point started = Clock::now();
  Restore restore;
  restore.version = version;
  try {
    VersionDescription description = store_.describe(version);
    const std::optional<CheckpointRecord> record = decode(description.metadata, what);
    if (!record) {
      throw StateError(what + " was not written by the automatic runtime; give the runtime a store of its own");
    }
    restore.record = *record;
    restore.regions = std::move(description.regions);
    read_control(restore, what);
  } catch (const Error& error) {
    unprotect_all();
    if (error.code() != ErrorCode::kCorrupt && error.code() != ErrorCode::kStorage) throw;
    report(0, "skipping " + what + ": " + error.what());
    return false;
  }
  restore.skipping = !restore.record.has_payload && !restore.record.init_end;
  restore.read_seconds = seconds_since(started);
  restore.replay_start = Clock::now();
  restore_ = std::move(restore);
  report(1, "restoring " + what + ": taken before loop " + std::to_string(restore_->record.loop_index) + " ('" +
                restore_->record.location + "')");
  return true;
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
    pieces.push_back({region.label, into->data(), region.bytes, region.type});
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
                     restore.read_seconds + seconds_since(read_started), replay_seconds};
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
void Runtime::Impl::restore_datasets() {
  const Restore& restore = *restore_;
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
    const std::uint64_t expected = ring ? (dataset.ring ? dataset.ring->bytes() : 0) : dataset.bytes;
    if (region.bytes != expected) {
      throw MismatchError(version + " holds " + std::to_string(region.bytes) + " bytes of '" + label +
                          "' but dataset '" + name + "' has " + std::to_string(expected) +
                          (ring ? " bytes of halo ring" : " bytes"));
    }
    std::byte* into = dataset.data;
    if (ring) into = rings.emplace_back(&dataset, std::vector<std::byte>(region.bytes)).second.data();
    restored.emplace_back(id, ring);
    pieces.push_back({label, into, region.bytes, region.type});
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
