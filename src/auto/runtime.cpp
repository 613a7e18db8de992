// Runtime: the automatic checkpointing of include/resurgo/auto.hpp on top of
// the public Store API. Normal mode runs Algorithm 1 of the OPS paper (a
// checkpointing region per due checkpoint, entered at the chosen location);
// restore mode runs Algorithm 2 (loops skipped and queries answered from the
// checkpoint's log until its loop, where the datasets are restored).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "auto/agreement.h"
#include "auto/checkpoint_record.h"
#include "auto/checkpoint_region.h"
#include "auto/dataset_table.h"
#include "auto/location_strategy.h"
#include "auto/query_log.h"
#include "auto/termination_flush.h"
#include "format/container.h"
#include "resurgo/auto.hpp"

namespace resurgo::autockpt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point begin) { return std::chrono::duration<double>(Clock::now() - begin).count(); }

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

std::uint64_t fnv(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* begin = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ begin[i]) * kFnvPrime;
  return hash;
}

// The loop sequence so far: a replay that takes another path is caught when
// it reaches the checkpoint's loop (and at its first query) with another hash.
std::uint64_t mix_loop(std::uint64_t hash, std::string_view name, std::span<const Arg> args) {
  hash = fnv(hash, name.data(), name.size());
  for (const Arg& arg : args) {
    const std::int32_t fields[3] = {arg.dataset, static_cast<std::int32_t>(arg.access),
                                    static_cast<std::int32_t>(arg.range)};
    hash = fnv(hash, fields, sizeof fields);
  }
  return fnv(hash, "|", 1);
}

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1u << 20));
  return text;
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

bool keeps_only_memory(const Config& config) {
  return config.memory.every > 0 && config.local.every == 0 && config.persistent.every == 0;
}

}  // namespace

class Runtime::Impl {
 public:
  Impl(Store& store, Options options);
  ~Impl();

  int dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo);
  bool loop(std::string_view name, std::span<const Arg> args);
  void query(void* data, std::size_t bytes);
  void initphase_done();
  bool fastfw(void* payload, std::size_t bytes);
  bool datlist(std::span<const int> ids, void* payload, std::size_t bytes);
  void trigger() { triggered_ = !restore_.has_value(); }

  bool restoring() const { return restore_.has_value(); }
  std::uint64_t loop_index() const { return loop_index_; }
  std::string location() const { return location_; }
  std::optional<CheckpointReport> last_checkpoint() const { return last_checkpoint_; }
  std::optional<RestoreReport> last_restore() const { return last_restore_; }
  std::uint64_t bookkeeping_bytes() const;

 private:
  // A version read at attach, restored when the run reaches its point.
  struct Restore {
    int version = -1;
    CheckpointRecord record;
    std::vector<RegionDescription> regions;  // the version's region table
    std::vector<std::byte> payload;
    std::optional<QueryReplay> replay;
    bool skipping = false;  // loops are skipped and queries replayed
    std::uint64_t skipped = 0;
    double read_seconds = 0;
    // Where the replay began: the end of the read, or the end of the
    // initialisation phase (which a run from scratch executes too).
    Clock::time_point replay_start;
  };
  // A region protected in the store.
  struct Protected {
    int id = 0;
    std::string label;
    const void* data = nullptr;
    std::uint64_t bytes = 0;
  };
  // A dataset a loop declared read-only, with its hash before the loop.
  struct ReadCheck {
    int dataset = 0;
    int part = 0;
    std::uint64_t hash = 0;
    std::string loop;
    std::uint64_t loop_index = 0;
  };

  void report(int level, const std::string& message) const;
  void attach_restore();
  bool read_version(int version);
  bool replay_loop(std::string_view name);
  void finish_restore(std::string_view where, void* payload, std::size_t payload_bytes);
  void read_control(Restore& restore, const std::string& what);
  void size_store_buffer(std::string_view first_loop);
  void restore_datasets();
  bool is_due();
  void become_due();
  void start_checkpoint(CheckpointKind kind, std::string location, const void* payload, std::size_t payload_bytes);
  void close_region();
  void commit(const std::vector<Piece>& pieces, CheckpointRecord record, CheckpointReport report);
  void record_read_checks(std::string_view name);
  void verify_read_checks();
  void flush_on_signal(int signal);
  void protect_exactly(std::vector<Piece> pieces);
  std::string capture_breakdown(int version);
  void unprotect_all() { protect_exactly({}); }

  Store& store_;
  Options options_;
  std::string store_what_;  // "store 'name'", for messages
  DatasetTable datasets_;
  QueryLog log_;
  LocationStrategy strategy_;
  StagingBuffers buffers_;
  Agreement agreement_;
  std::vector<PartAccess> accesses_;  // of the current loop
  std::string last_loop_;             // name of the current loop, for messages

  std::uint64_t loop_index_ = 0;
  std::uint64_t sequence_hash_ = kFnvOffset;
  std::optional<std::uint64_t> init_end_;

  Clock::time_point last_checkpoint_time_ = Clock::now();
  std::uint64_t last_checkpoint_loop_ = 0;
  bool triggered_ = false;
  bool due_ = false;             // the next location starts a region
  bool user_location_ = false;   // fastfw()/datlist() name the location
  bool location_chosen_ = false;
  std::string location_;
  bool store_buffer_sized_ = false;  // the store's capture buffer was made for our checkpoints

  std::optional<CheckpointRegion> region_;
  CheckpointRecord region_record_;
  QueryLog::Mark region_log_;  // the log at the region's restore point
  std::vector<std::byte> region_payload_;
  double region_blocking_ = 0;

  std::mutex store_mutex_;  // the application thread and the termination watcher
  std::vector<Protected> protected_;  // what the store holds protected now
  int next_region_id_ = 0;
  int next_version_ = 0;
  std::optional<int> newest_version_;
  long checkpoints_ = 0;
  std::optional<CheckpointReport> last_checkpoint_;

  std::optional<Restore> restore_;
  std::optional<RestoreReport> last_restore_;
  std::vector<ReadCheck> read_checks_;
  std::unique_ptr<TerminationFlush> flush_;
};

Runtime::Impl::Impl(Store& store, Options options)
    : store_(store),
      options_(std::move(options)),
      store_what_("store '" + store.name() + "'"),
      strategy_(options_.region_timeout_loops),
      agreement_(comm_of(store), options_.agreement_loops) {
  if (options_.region_timeout_loops == 0) {
    throw InvalidArgumentError("automatic checkpointing of " + store_what_ + ": region_timeout_loops must be > 0");
  }
  const std::optional<int> latest = store_.latest();
  next_version_ = -static_cast<int>(agreement_.smallest(-(latest ? *latest + 1 : 0)));  // the largest over ranks
  attach_restore();
  if (options_.flush_on_termination && keeps_only_memory(store_.config())) {
    flush_ = std::make_unique<TerminationFlush>([this](int signal) { flush_on_signal(signal); });
  }
}

Runtime::Impl::~Impl() {
  flush_.reset();
  try {
    unprotect_all();  // the pieces point into this runtime's buffers
  } catch (const std::exception&) {
    // the store was closed first: nothing of ours is left protected
  }
}

void Runtime::Impl::report(int level, const std::string& message) const {
  if (options_.diagnostics < level) return;
  if (options_.report) {
    options_.report(message);
  } else {
    std::fprintf(stderr, "resurgo auto: %s\n", message.c_str());
  }
}

// ---------------------------------------------------------------- datasets

int Runtime::Impl::dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type,
                           int halo) {
  if (region_) {
    throw StateError("dataset '" + name + "' declared inside a checkpointing region; declare datasets before the loops");
  }
  return datasets_.add(name, data, bytes, type, halo);
}

// -------------------------------------------------------------------- loops

bool Runtime::Impl::loop(std::string_view name, std::span<const Arg> args) {
  verify_read_checks();
  datasets_.accesses(args, name, loop_index_ + 1, accesses_);
  ++loop_index_;
  last_loop_.assign(name);
  sequence_hash_ = mix_loop(sequence_hash_, name, args);
  datasets_.mark_written(accesses_);
  if (restore_) return replay_loop(name);
  if (!location_chosen_ || !store_buffer_sized_) strategy_.observe(name, loop_index_, accesses_, datasets_);
  if (region_ && region_record_.kind == CheckpointKind::kRegion && name == region_record_.location) {
    close_region();  // a whole period passed: what was not met is not met at all
  }
  if (!region_ && !due_ && agreement_.due_at_loop(loop_index_, is_due())) become_due();
  if (!region_ && due_ && !user_location_ && (location_.empty() || name == location_)) {
    start_checkpoint(CheckpointKind::kRegion, std::string(name), nullptr, 0);
    region_.emplace(datasets_, buffers_, options_.region_timeout_loops, options_.diagnostics >= 3);
  }
  if (region_) {
    const Clock::time_point started = Clock::now();
    if (region_->loops() == 0) size_store_buffer(name);
    const bool complete = region_->before_loop(name, accesses_);
    region_blocking_ += seconds_since(started);
    if (complete) close_region();
  }
  if (options_.check_access) record_read_checks(name);
  return true;
}

void Runtime::Impl::query(void* data, std::size_t bytes) {
  verify_read_checks();
  if (bytes > 0 && data == nullptr) throw InvalidArgumentError("query: the pointer is null");
  const auto sequence = static_cast<std::uint32_t>(sequence_hash_);
  if (restore_ && restore_->skipping) {
    restore_->replay->next(loop_index_, sequence, last_loop_, data, bytes);
    return;
  }
  log_.append(loop_index_, sequence, data, bytes);
}

void Runtime::Impl::initphase_done() {
  verify_read_checks();
  if (init_end_) {
    throw StateError("initphase_done called a second time (first after loop " + std::to_string(*init_end_) + ")");
  }
  init_end_ = loop_index_;
  datasets_.forget_writes();
  strategy_.reset();
  log_.clear();  // a restarted run executes the initialisation again, queries included
  if (!restore_) return;
  const CheckpointRecord& record = restore_->record;
  if (record.init_end != init_end_) {
    throw MismatchError("replay diverged: the initialisation phase ends after loop " + std::to_string(loop_index_) +
                        (record.init_end ? " but it ended after loop " + std::to_string(*record.init_end)
                                         : " but it had not ended before the checkpoint") +
                        " in the run that wrote version " + std::to_string(restore_->version));
  }
  restore_->skipping = !record.has_payload;
  restore_->replay_start = Clock::now();
}

// ------------------------------------------------------------------ restore

// The newest automatic checkpoint whose control part (record, query log,
// payload) reads intact; its datasets are read at the restore point, once
// the application declared them.
void Runtime::Impl::attach_restore() {
  std::vector<VersionInfo> versions = store_.versions();
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

// ------------------------------------------------------------- checkpoints

// Changes the store's protected set to `pieces`, touching only what
// differs: from one checkpoint to the next the pieces are mostly the same
// (the same datasets in place, the same reused buffers), so the store keeps
// its buffer. Removals go first and additions largest first, so that the
// protected total grows as little as it can on the way.
void Runtime::Impl::protect_exactly(std::vector<Piece> pieces) {
  const auto same = [](const Protected& held, const Piece& piece) {
    return held.label == piece.label && held.data == piece.data && held.bytes == piece.bytes;
  };
  std::erase_if(protected_, [&](const Protected& held) {
    const bool kept = std::any_of(pieces.begin(), pieces.end(), [&](const Piece& p) { return same(held, p); });
    if (!kept) store_.unprotect(held.id);
    return !kept;
  });
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.bytes > b.bytes; });
  for (const Piece& piece : pieces) {
    if (std::any_of(protected_.begin(), protected_.end(), [&](const Protected& held) { return same(held, piece); })) {
      continue;
    }
    const int id = next_region_id_++;
    store_.protect(id, const_cast<std::byte*>(piece.data), piece.bytes, piece.label, piece.type);
    protected_.push_back({id, piece.label, piece.data, piece.bytes});
  }
}

bool Runtime::Impl::is_due() {
  if (triggered_) return true;
  if (options_.interval_loops > 0) return loop_index_ - last_checkpoint_loop_ >= options_.interval_loops;
  if (options_.interval_seconds > 0) return seconds_since(last_checkpoint_time_) >= options_.interval_seconds;
  if (store_.config().interval.policy != IntervalPolicy::kNone) return store_.need_checkpoint();
  return false;
}

// The first due checkpoint fixes the location (section 5.2): the recurring
// loop with the least to save, from the statistics gathered so far.
void Runtime::Impl::become_due() {
  due_ = true;
  if (user_location_ || location_chosen_) return;
  const std::vector<LocationCandidate> ranking = strategy_.ranking();
  const std::optional<std::string> chosen =
      agreement_.location(ranking.empty() ? std::nullopt : std::optional(ranking.front().loop), strategy_.loops());
  if (!chosen) {
    report(2, "checkpoint due at loop " + std::to_string(loop_index_) +
                  " before the statistics covered two periods of any loop; the region starts here");
    return;
  }
  location_ = *chosen;
  location_chosen_ = true;
  std::string table;
  for (std::size_t i = 0; i < ranking.size() && i < 5; ++i) {
    const LocationCandidate& c = ranking[i];
    table += "\n  " + c.loop + ": " + mib(static_cast<std::uint64_t>(c.mean_bytes)) + " (spread " +
             mib(static_cast<std::uint64_t>(c.spread_bytes)) + "), " + std::to_string(c.occurrences) +
             " times, every " + std::to_string(static_cast<long long>(c.mean_spacing)) + " loops";
  }
  report(2, "checkpoint location: before loop '" + location_ + "', the recurring loop that saves least (of " +
                std::to_string(ranking.size()) + "):" + table);
}

// The first region's store buffer is made (and faulted in) while its loops
// run, from what the statistics expect a region entered at its first loop
// to save, a quarter more so that a region saving a little more does not
// make it again at the close. Later checkpoints reuse it.
void Runtime::Impl::size_store_buffer(std::string_view first_loop) {
  if (store_buffer_sized_) return;
  const std::optional<double> expected = strategy_.mean_bytes(first_loop);
  if (!expected) return;
  const auto bytes = static_cast<std::uint64_t>(*expected);
  std::lock_guard lock(store_mutex_);
  store_.reserve(bytes + bytes / 4 + log_.memory_bytes());
  store_buffer_sized_ = true;
}

// The restore point of the checkpoint about to be made: here, with the
// queries asked so far (none are needed when a payload resumes the run).
void Runtime::Impl::start_checkpoint(CheckpointKind kind, std::string location, const void* payload,
                                     std::size_t payload_bytes) {
  region_record_ = CheckpointRecord{kind, payload_bytes > 0, loop_index_, init_end_, sequence_hash_, std::move(location)};
  region_log_ = payload_bytes > 0 ? QueryLog::Mark{} : log_.mark();
  const auto* begin = static_cast<const std::byte*>(payload);
  region_payload_.assign(begin, begin + payload_bytes);
  region_blocking_ = 0;
  due_ = false;
  triggered_ = false;
}

void Runtime::Impl::close_region() {
  const Clock::time_point started = Clock::now();
  const std::vector<Piece> pieces = region_->close();
  CheckpointReport made;
  made.staged_bytes = region_->staged_bytes();
  made.region_loops = region_->loops();
  made.timed_out = region_->timed_out();
  made.blocking_seconds = region_blocking_ + seconds_since(started);
  for (const std::string& decision : region_->decisions()) report(3, decision);
  region_.reset();
  commit(pieces, region_record_, made);
}

// Where the store's part of the blocking went, for the diagnostics.
std::string Runtime::Impl::capture_breakdown(int version) {
  if (options_.diagnostics < 1) return {};
  for (const VersionStats& stats : store_.stats()) {
    if (stats.version != version) continue;
    char text[160];
    std::snprintf(text, sizeof text, " (store: %.3f ms, of which copy %.3f, first touch %.3f, waiting %.3f)",
                  stats.blocking_seconds * 1e3, stats.copy_seconds * 1e3, stats.first_touch_seconds * 1e3,
                  stats.backpressure_seconds * 1e3);
    return text;
  }
  return {};
}

void Runtime::Impl::commit(const std::vector<Piece>& pieces, CheckpointRecord record, CheckpointReport made) {
  const Clock::time_point started = Clock::now();
  std::lock_guard lock(store_mutex_);
  for (const Piece& piece : pieces) {
    (piece.label.ends_with(kRingSuffix) ? made.halos : made.saved).push_back(piece.label);
    made.dataset_bytes += piece.bytes;
  }
  const std::vector<std::byte> metadata = encode(record);
  store_.set_metadata(metadata.data(), metadata.size());
  // The store copies the regions before checkpoint() returns: the log may
  // show its state at the restore point only for that long.
  log_.as_of(region_log_, [&](const std::byte* log, std::size_t log_bytes) {
    std::vector<Piece> all = pieces;
    all.push_back({kQueryLogLabel, log, log_bytes, ElementType{"uint8", {}}});
    if (!region_payload_.empty()) all.push_back({kPayloadLabel, region_payload_.data(), region_payload_.size(), {}});
    std::uint64_t total = 0;
    for (const Piece& piece : all) total += piece.bytes;
    store_.reserve(total);  // one buffer for the whole set, not one per region protected
    store_buffer_sized_ = true;
    protect_exactly(std::move(all));
    store_.checkpoint(next_version_);
  });
  made.version = next_version_;
  made.loop_index = record.loop_index;
  made.location = record.location;
  made.query_log_bytes = region_log_.bytes;
  made.payload_bytes = region_payload_.size();
  made.blocking_seconds += seconds_since(started);
  newest_version_ = next_version_++;
  ++checkpoints_;
  if (record.has_payload) log_.clear();  // a restart resumes at the payload's location: no replay
  last_checkpoint_loop_ = loop_index_;
  last_checkpoint_time_ = Clock::now();
  report(1, "checkpoint " + std::to_string(checkpoints_) + " (version " + std::to_string(made.version) +
                ") before loop " + std::to_string(made.loop_index) + " '" + made.location + "': saved " +
                join(made.saved) + "; halo rings " + join(made.halos) + "; " + mib(made.dataset_bytes) +
                " of datasets, query log " + std::to_string(made.query_log_bytes) + " B, staged " +
                mib(made.staged_bytes) + ", region of " + std::to_string(made.region_loops) + " loops" +
                (made.timed_out ? " (timed out)" : "") + ", blocked " +
                std::to_string(made.blocking_seconds * 1e3) + " ms" + capture_breakdown(made.version));
  last_checkpoint_ = std::move(made);
}

// ------------------------------------------------------- user locations

bool Runtime::Impl::fastfw(void* payload, std::size_t bytes) {
  verify_read_checks();
  if (bytes > 0 && payload == nullptr) throw InvalidArgumentError("fastfw: the payload pointer is null");
  if (restore_) {
    if (!restore_->record.has_payload || restore_->record.kind != CheckpointKind::kFastForward) return false;
    finish_restore("fastfw", payload, bytes);
    return true;
  }
  user_location_ = true;
  if (region_) close_region();  // a whole period passed since the region opened here
  if (!due_ && agreement_.due_now(is_due())) due_ = true;
  if (!due_) return false;
  start_checkpoint(CheckpointKind::kFastForward, "fastfw", payload, bytes);
  region_.emplace(datasets_, buffers_, options_.region_timeout_loops, options_.diagnostics >= 3);
  return false;
}

bool Runtime::Impl::datlist(std::span<const int> ids, void* payload, std::size_t bytes) {
  verify_read_checks();
  if (bytes > 0 && payload == nullptr) throw InvalidArgumentError("datlist: the payload pointer is null");
  std::vector<Piece> pieces;
  for (const int id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= datasets_.size()) {
      throw InvalidArgumentError("datlist names dataset id " + std::to_string(id) + ", which was not declared");
    }
    const Dataset& dataset = datasets_[id];
    pieces.push_back({dataset.name, dataset.data, dataset.bytes, dataset.type});
  }
  if (restore_) {
    const CheckpointRecord& record = restore_->record;
    if (record.kind != CheckpointKind::kDatlist) return false;
    if (!record.has_payload && !(restore_->skipping && loop_index_ == record.loop_index)) return false;
    finish_restore("datlist", payload, bytes);
    return true;
  }
  user_location_ = true;
  if (!region_ && !due_ && agreement_.due_now(is_due())) due_ = true;
  if (region_ || !due_) return false;
  start_checkpoint(CheckpointKind::kDatlist, "datlist", payload, bytes);
  commit(pieces, region_record_, CheckpointReport{});
  return false;
}

// ------------------------------------------------------- access checking

// A hash of one part of a dataset: the ring packed, or the dataset with its
// ring zeroed (a debugging aid: the copies do not matter).
static std::uint64_t part_hash(const Dataset& dataset, int part) {
  if (!dataset.ring) return format::checksum(dataset.data, dataset.bytes);
  if (part == kRingPart) {
    std::vector<std::byte> ring(dataset.ring->bytes());
    dataset.ring->pack(dataset.data, ring.data());
    return format::checksum(ring.data(), ring.size());
  }
  std::vector<std::byte> interior(dataset.data, dataset.data + dataset.bytes);
  const std::vector<std::byte> zeros(dataset.ring->bytes());
  dataset.ring->unpack(zeros.data(), interior.data());
  return format::checksum(interior.data(), interior.size());
}

void Runtime::Impl::record_read_checks(std::string_view name) {
  for (const PartAccess& access : accesses_) {
    if (access.written) continue;
    read_checks_.push_back({access.dataset, access.part, part_hash(datasets_[access.dataset], access.part),
                            std::string(name), loop_index_});
  }
}

void Runtime::Impl::verify_read_checks() {
  if (read_checks_.empty()) return;
  std::vector<ReadCheck> checks;
  checks.swap(read_checks_);
  for (const ReadCheck& check : checks) {
    const Dataset& dataset = datasets_[check.dataset];
    if (part_hash(dataset, check.part) == check.hash) continue;
    throw MismatchError("loop " + std::to_string(check.loop_index) + " '" + check.loop + "' declared " +
                        (dataset.ring ? (check.part == kRingPart ? "the halo of " : "the interior of ") : "") +
                        "dataset '" + dataset.name +
                        "' read-only but changed it; declare it read_write (or write) there");
  }
}

// ------------------------------------------------------ termination flush

void Runtime::Impl::flush_on_signal(int signal) {
  std::lock_guard lock(store_mutex_);
  if (!newest_version_) return;
  try {
    store_.persist(*newest_version_, kL2);
    report(1, "signal " + std::to_string(signal) + ": version " + std::to_string(*newest_version_) +
                  " written to L2 before terminating");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "resurgo auto: signal %d: could not write version %d to L2: %s\n", signal,
                 *newest_version_, error.what());
  }
}

std::uint64_t Runtime::Impl::bookkeeping_bytes() const {
  std::uint64_t bytes = log_.memory_bytes() + strategy_.bookkeeping_bytes() + buffers_.bytes();
  if (restore_) bytes += restore_->payload.capacity();
  return bytes;
}

// ------------------------------------------------------------- public API

Runtime::Runtime(Store& store, Options options) : impl_(std::make_unique<Impl>(store, std::move(options))) {}
Runtime::~Runtime() = default;

int Runtime::dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo) {
  return impl_->dataset(name, data, bytes, type, halo);
}
bool Runtime::loop(std::string_view name, std::span<const Arg> args) { return impl_->loop(name, args); }
void Runtime::query(void* data, std::size_t bytes) { impl_->query(data, bytes); }
void Runtime::initphase_done() { impl_->initphase_done(); }
bool Runtime::fastfw(void* payload, std::size_t bytes) { return impl_->fastfw(payload, bytes); }
bool Runtime::datlist(std::span<const int> datasets, void* payload, std::size_t bytes) {
  return impl_->datlist(datasets, payload, bytes);
}
void Runtime::trigger() { impl_->trigger(); }
bool Runtime::restoring() const { return impl_->restoring(); }
std::uint64_t Runtime::loop_index() const { return impl_->loop_index(); }
std::string Runtime::location() const { return impl_->location(); }
std::optional<CheckpointReport> Runtime::last_checkpoint() const { return impl_->last_checkpoint(); }
std::optional<RestoreReport> Runtime::last_restore() const { return impl_->last_restore(); }
std::uint64_t Runtime::bookkeeping_bytes() const { return impl_->bookkeeping_bytes(); }

}  // namespace resurgo::autockpt
