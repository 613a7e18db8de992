// Runtime: the automatic checkpointing of include/resurgo/auto.hpp on top of
// the public Store API. Normal mode runs Algorithm 1 of the OPS paper (a
// checkpointing region per due checkpoint, entered at the chosen location);
// restore mode runs Algorithm 2 (loops skipped and queries answered from the
// checkpoint's log until its loop, where the datasets are restored), in
// runtime_restore.cpp.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "auto/block_cover.h"
#include "auto/runtime_impl.h"
#include "base/units.h"
#include "base/checksum.h"

namespace resurgo::autockpt {

namespace {

// The loop sequence so far: a replay that takes another path is caught when
// it reaches the checkpoint's loop (and at its first query) with another hash.
std::uint64_t mix_loop(std::uint64_t hash, std::string_view name, std::span<const Arg> args) {
  hash = fnv(hash, name);
  for (const Arg& arg : args) {
    const std::int32_t fields[3] = {arg.dataset, static_cast<std::int32_t>(arg.access),
                                    static_cast<std::int32_t>(arg.range)};
    hash = fnv(hash, fields, sizeof fields);
  }
  return fnv(hash, "|", 1);
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

// The query log and the payload are the same on every rank when every
// dataset is a block of a global array: a job of another rank count
// replays rank 0's. Checked when written, so that a version that could not
// be replayed elsewhere is never made.
std::uint64_t control_hash(const CheckpointRecord& record, const std::byte* log, std::size_t used_log_bytes,
                           const std::vector<std::byte>& payload) {
  const std::uint64_t sizes[2] = {record.query_log_bytes, record.payload_bytes};
  std::uint64_t hash = fnv(kFnvOffset, sizes, sizeof sizes);
  hash = fnv(hash, log, used_log_bytes);
  return fnv(hash, payload.data(), payload.size());
}

bool keeps_only_memory(const Config& config) {
  return config.memory.every > 0 && config.local.every == 0 && config.persistent.every == 0;
}

}  // namespace


Runtime::Impl::Impl(Store& store, Options options)
    : store_(store),
      options_(std::move(options)),
      store_what_("store '" + store.name() + "'"),
      strategy_(options_.region_timeout_loops),
      agreement_(comm_of(store), options_.agreement_loops, store.config().mpi.timeout, store_what_) {
  if (options_.region_timeout_loops == 0) {
    throw InvalidArgumentError("automatic checkpointing of " + store_what_ + ": region_timeout_loops must be > 0");
  }
  if (!agreement_.alone()) {
    report(2, "the " + std::to_string(agreement_.ranks()) + " ranks exchange every " +
                  std::to_string(options_.agreement_loops) + " loops " +
                  (agreement_.pipelined() ? "on a thread, each answer at the next exchange"
                                          : "on this thread, blocking (the communicator does not let a thread call "
                                            "it: MPI without MPI_THREAD_MULTIPLE)"));
  }
  const std::vector<VersionInfo> versions = store_.versions();
  const int next = versions.empty() ? 0 : versions.back().version + 1;
  next_version_ = static_cast<int>(agreement_.largest(next));
  attach_restore(versions);
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

int Runtime::Impl::dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo,
                           const GlobalBlock& block) {
  if (region_) {
    throw StateError("dataset '" + name +
                     "' declared inside a checkpointing region; declare datasets before the loops");
  }
  const int id = datasets_.add(name, data, bytes, type, halo, block);
  blocks_checked_ = false;
  return id;
}

// Before the first checkpoint (or restore) of global blocks, and again after
// a declaration: the ranks' blocks must tile every global array.
void Runtime::Impl::check_blocks(const std::string& call) {
  if (blocks_checked_) return;
  const std::string problem = datasets_.any_global() ? blocks_problem(datasets_, agreement_) : "";
  if (!problem.empty()) {
    throw MismatchError(call + " on " + store_what_ + ": the ranks' blocks do not tile the global arrays: " + problem +
                        "; declare blocks that hold every element of each global array once; nothing was written");
  }
  blocks_checked_ = true;
}

// -------------------------------------------------------------------- loops

bool Runtime::Impl::loop(std::string_view name, std::span<const Arg> args) {
  verify_read_checks();
  datasets_.accesses(args, name, loop_index_ + 1, accesses_);
  ++loop_index_;
  sequence_hash_ = mix_loop(sequence_hash_, name, args);
  datasets_.mark_written(accesses_);
  if (restore_) {
    restore_->loop_name.assign(name);  // for the messages of a diverging replay
    return replay_loop(name);
  }
  if (!location_chosen_ || !store_buffer_sized_) strategy_.observe(name, loop_index_, accesses_, datasets_);
  if (region_ && region_record_.kind == CheckpointKind::kRegion && name == region_record_.location) {
    close_region();  // a whole period passed: what was not met is not met at all
  }
  if (!region_ && !due_ && agreement_.due_at_loop(is_due(), progress(name))) become_due();
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
    restore_->replay->next(loop_index_, sequence, restore_->loop_name, data, bytes);
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
    store_.protect(id, const_cast<std::byte*>(piece.data), piece.bytes, piece.label, piece.type, piece.block);
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
    table += "\n  " + c.loop + ": " + size_text(static_cast<std::uint64_t>(c.mean_bytes)) + " (spread " +
             size_text(static_cast<std::uint64_t>(c.spread_bytes)) + "), " + std::to_string(c.occurrences) +
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

bool Runtime::Impl::control_alike(const CheckpointRecord& record, const std::byte* log) {
  const auto hash = static_cast<long>(control_hash(record, log, region_log_.bytes, region_payload_) >> 2);
  const long smallest = agreement_.smallest(hash);  // both on every rank: each is a collective
  const long largest = agreement_.largest(hash);
  return smallest == largest;
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

void Runtime::Impl::refuse_unlike_controls(std::uint64_t loop_index) const {
  throw MismatchError("automatic checkpoint before loop " + std::to_string(loop_index) + " on " + store_what_ +
                      ": the ranks' query logs or payloads differ, and every dataset is a block of a global array, "
                      "whose checkpoints restart on another rank count by replaying rank 0's; query only values "
                      "that are the same on every rank (reduce them first) and give fastfw/datlist the same "
                      "payload on every rank; nothing was written");
}

void Runtime::Impl::commit(const std::vector<Piece>& pieces, CheckpointRecord record, CheckpointReport made) {
  const Clock::time_point started = Clock::now();
  check_blocks("automatic checkpoint before loop " + std::to_string(record.loop_index));
  std::lock_guard lock(store_mutex_);
  for (const Piece& piece : pieces) {
    (piece.label.ends_with(kRingSuffix) ? made.halos : made.saved).push_back(piece.label);
    made.dataset_bytes += piece.bytes;
  }
  // The store copies the regions before checkpoint() returns: the log may
  // show its state at the restore point only for that long.
  bool alike = true;
  log_.as_of(region_log_, [&](const std::byte* log, std::size_t log_bytes) {
    std::vector<Piece> all = pieces;
    record.ranks = static_cast<std::uint32_t>(agreement_.ranks());
    record.global = datasets_.all_global();
    if (record.global) {
      record.query_log_bytes = log_bytes;
      record.payload_bytes = region_payload_.size();
      record.saved = made.saved;
      alike = control_alike(record, log);
      if (!alike) return;  // refused once the log is back as it is
    }
    const std::uint32_t rows = record.global ? record.ranks : 0;
    all.push_back(control_piece(kQueryLogLabel, log, log_bytes, rows, agreement_.rank()));
    if (!region_payload_.empty()) {
      all.push_back(
          control_piece(kPayloadLabel, region_payload_.data(), region_payload_.size(), rows, agreement_.rank()));
    }
    const std::vector<std::byte> metadata = encode(record);
    store_.set_metadata(metadata.data(), metadata.size());
    std::uint64_t total = 0;
    for (const Piece& piece : all) total += piece.bytes;
    store_.reserve(total);  // one buffer for the whole set, not one per region protected
    store_buffer_sized_ = true;
    protect_exactly(std::move(all));
    store_.checkpoint(next_version_);
  });
  if (!alike) refuse_unlike_controls(record.loop_index);
  made.version = next_version_;
  made.loop_index = record.loop_index;
  made.location = record.location;
  made.query_log_bytes = region_log_.bytes;
  made.payload_bytes = region_payload_.size();
  made.blocking_seconds += seconds_since(started);
  ++next_version_;
  if (record.has_payload) log_.clear();  // a restart resumes at the payload's location: no replay
  last_checkpoint_loop_ = loop_index_;
  last_checkpoint_time_ = Clock::now();
  report(1, "checkpoint (version " + std::to_string(made.version) + ") before loop " + std::to_string(made.loop_index) + " '" + made.location + "': saved " +
                join(made.saved) + "; halo rings " + join(made.halos) + "; " + size_text(made.dataset_bytes) +
                " of datasets, query log " + std::to_string(made.query_log_bytes) + " B, staged " +
                size_text(made.staged_bytes) + ", region of " + std::to_string(made.region_loops) + " loops" +
                (made.timed_out ? " (timed out)" : "") + ", blocked " +
                std::to_string(made.blocking_seconds * 1e3) + " ms");
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
  if (!due_ && agreement_.due_now(is_due(), progress("fastfw"))) due_ = true;
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
    pieces.push_back({dataset.name, dataset.data, dataset.bytes, dataset.type, dataset.block});
  }
  if (restore_) {
    const CheckpointRecord& record = restore_->record;
    if (record.kind != CheckpointKind::kDatlist) return false;
    if (!record.has_payload && !(restore_->skipping && loop_index_ == record.loop_index)) return false;
    finish_restore("datlist", payload, bytes);
    return true;
  }
  user_location_ = true;
  if (!region_ && !due_ && agreement_.due_now(is_due(), progress("datlist"))) due_ = true;
  if (region_ || !due_) return false;
  start_checkpoint(CheckpointKind::kDatlist, "datlist", payload, bytes);
  commit(pieces, region_record_, CheckpointReport{});
  return false;
}

// ------------------------------------------------------- access checking

// A hash of one part of a dataset: the ring packed, or the dataset with its
// ring zeroed (a debugging aid: the copies do not matter).
static std::uint64_t part_hash(const Dataset& dataset, int part) {
  if (!dataset.ring) return checksum(dataset.data, dataset.bytes);
  if (part == kRingPart) {
    std::vector<std::byte> ring(dataset.ring->bytes());
    dataset.ring->pack(dataset.data, ring.data());
    return checksum(ring.data(), ring.size());
  }
  std::vector<std::byte> interior(dataset.data, dataset.data + dataset.bytes);
  const std::vector<std::byte> zeros(dataset.ring->bytes());
  dataset.ring->unpack(zeros.data(), interior.data());
  return checksum(interior.data(), interior.size());
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
  if (!last_checkpoint_) return;
  const int version = last_checkpoint_->version;
  try {
    store_.persist(version, kL2);
    report(1, "signal " + std::to_string(signal) + ": version " + std::to_string(version) +
                  " written to L2 before terminating");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "resurgo auto: signal %d: could not write version %d to L2: %s\n", signal, version,
                 error.what());
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
  return impl_->dataset(name, data, bytes, type, halo, {});
}
int Runtime::dataset(const std::string& name, void* data, std::size_t bytes, const ElementType& type,
                     const GlobalBlock& block) {
  return impl_->dataset(name, data, bytes, type, 0, block);
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
