// Store: the registry, the pipeline threads and the tiers of one stream of
// checkpoints. checkpoint() only captures: it copies the protected bytes into
// the L1 host buffer (with idle pipeline workers helping). The flush thread
// writes L1 -> L2; the persist thread copies L2 -> L4 and evicts old files.
// A background failure is recorded on its version and thrown by the next
// mutating call (or wait) on the store.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/crash_point.h"
#include "core/log.h"
#include "core/names.h"
#include "core/registry.h"
#include "core/trace.h"
#include "format/container.h"
#include "pipeline/thread_pool.h"
#include "pipeline/version_writer.h"
#include "resurgo/resurgo.hpp"
#include "tier/directory_tier.h"
#include "tier/host_buffer.h"

namespace resurgo {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point begin, Clock::time_point end) {
  return std::chrono::duration<double>(end - begin).count();
}

// The rank of this process in an MPI or batch job, 0 when run alone.
int detect_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) return std::max(0, std::atoi(value));
  }
  return 0;
}

int pipeline_threads(const Config& config) {
  if (config.pipeline.threads > 0) return config.pipeline.threads;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 2u));
}

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

struct Job {
  int version = 0;
  format::Header header;
  std::vector<const std::byte*> sources;
  std::shared_ptr<HostBuffer> buffer;  // holds `block`; null when written from the caller's memory
  const std::byte* block = nullptr;
};

struct Failure {
  ErrorCode code;
  std::string message;
  bool reported = false;
};

struct VersionState {
  VersionStats stats;
  Clock::time_point started;
  bool to_l4 = false;
  bool l2_done = false;
  bool l4_done = false;
  bool finished = false;  // no work left for it, whatever the outcome
  std::optional<Failure> failure;
};

constexpr std::size_t kStatsHistory = 4096;
constexpr std::uint64_t kCapturePiece = 4u << 20;
// Versions bound for L4 that may wait for their copy (the one being copied
// included) before the flush thread waits too; see wait_for_l4_backlog.
constexpr std::size_t kMaxL4Backlog = 2;

}  // namespace

class Store::Impl {
 public:
  Impl(const std::string& name, const Config& config, std::shared_ptr<Env> env);
  ~Impl();

  void close();
  void protect(Region region);
  void unprotect(int id);
  void set_metadata(const void* data, std::size_t bytes);
  void checkpoint(int version);
  void wait(int version, int level);
  std::optional<int> latest();
  int restart(int version);
  std::vector<VersionInfo> versions();
  std::vector<VersionStats> stats();

  std::string name;
  Config config;
  int rank;
  std::vector<std::byte> metadata;
  RestartReport last_restart;

 private:
  void check_open(const char* call) const;
  // Throws the oldest background failure not yet reported; `prefix` (called
  // only then) says what the throwing call did. The caller holds `lock`.
  template <class Prefix>
  void report_failure(std::unique_lock<std::mutex>& lock, Prefix&& prefix);
  [[noreturn]] void throw_failure(VersionState& state, int version);
  void record_failure(int version, int level, const Error& error);
  bool settled(const VersionState& state, int level) const;
  void drain(std::unique_lock<std::mutex>& lock);
  void resize_buffer_if_idle();
  std::uint64_t wanted_buffer_capacity() const;
  format::Header make_header(int version) const;
  // Copies the protected regions into `block`; returns where each one went.
  std::vector<const std::byte*> capture(std::byte* block);
  void set_capturing(bool capturing);
  // Committed versions of this rank, each with the levels holding a copy.
  std::map<int, std::vector<int>> committed_versions();
  int newest_on_disk();

  void flush_loop();
  void flush(Job& job);
  void wait_for_l4_backlog(int version);
  void persist_loop();
  void persist(int version);
  void evict();

  std::uint64_t restore(DirectoryTier& tier, int version);
  void check_regions(const format::Container& container, const std::string& path, int version,
                     std::vector<std::byte*>& destinations) const;
  std::optional<int> restore_one(int version, bool quarantine_if_damaged);

  std::shared_ptr<Env> env_;
  Logger log_;
  Trace trace_;
  DirectoryTier local_;
  DirectoryTier persistent_;
  std::unique_ptr<FileLock> lock_;
  Registry registry_;
  std::shared_ptr<HostBuffer> buffer_;
  std::unique_ptr<ThreadPool> pool_;
  bool warned_synchronous_ = false;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> flush_queue_;
  std::deque<int> persist_queue_;
  int persisting_ = -1;
  // Evictions never start while the application thread copies into the
  // buffer: unlinking a large file (tens of milliseconds of kernel time)
  // would compete with the capture. (Waiting for the next flush to start
  // instead, as before, starved them under load: the stress campaign saw 20
  // files at L2 with keep = 2.)
  bool eviction_due_ = false;
  bool evicting_ = false;
  bool capturing_ = false;
  std::map<int, VersionState> states_;
  int unreported_failures_ = 0;
  int newest_version_ = -1;
  long checkpoints_ = 0;
  bool stopping_ = false;
  bool closed_ = false;
  std::thread flusher_;
  std::thread persister_;
};

Store::Impl::Impl(const std::string& store_name, const Config& store_config, std::shared_ptr<Env> env)
    : name(store_name),
      config(store_config),
      rank(detect_rank()),
      env_(env ? std::move(env) : Env::posix()),
      log_(store_name, store_config.log.level),
      trace_(store_config.trace.path),
      local_(2, absolute(config.local.path.empty() ? Config::default_local_path() : config.local.path), store_name,
             rank, config.local.mode, config.local.keep, env_),
      persistent_(4, absolute(config.persistent.path), store_name, rank, config.persistent.mode,
                  config.persistent.keep, env_) {
  validate_store_name(name);
  local_.prepare();
  if (config.persistent.every > 0) persistent_.prepare();
  char lock_name[32];
  std::snprintf(lock_name, sizeof lock_name, "/.lock.r%06d", rank);
  lock_ = env_->lock(local_.dir() + lock_name);
  newest_version_ = newest_on_disk();
  pool_ = std::make_unique<ThreadPool>(pipeline_threads(config) - 1);
  flusher_ = std::thread([this] { flush_loop(); });
  persister_ = std::thread([this] { persist_loop(); });
  log_.info("opened store '" + name + "' rank " + std::to_string(rank) + ": L2 " + local_.dir() +
            (config.persistent.every > 0 ? ", L4 " + persistent_.dir() : ", L4 disabled"));
}

Store::Impl::~Impl() {
  if (closed_) return;
  try {
    close();
  } catch (const std::exception& error) {
    log_.error(std::string("closing the store: ") + error.what());
  }
}

void Store::Impl::check_open(const char* call) const {
  if (closed_) throw StateError(std::string(call) + " on store '" + name + "': the store is closed");
}

void Store::Impl::close() {
  if (closed_) return;
  std::unique_lock lock(mutex_);
  drain(lock);
  stopping_ = true;
  lock.unlock();
  changed_.notify_all();
  flusher_.join();
  persister_.join();
  closed_ = true;
  lock_.reset();
  if (trace_.enabled()) trace_.write(*env_);
  lock.lock();
  report_failure(lock, [] { return std::string("store closed, but "); });
}

// ---------------------------------------------------------------- registry

void Store::Impl::protect(Region region) {
  check_open("protect");
  registry_.add(std::move(region));
  resize_buffer_if_idle();
}

void Store::Impl::unprotect(int id) {
  check_open("unprotect");
  registry_.remove(id);
  resize_buffer_if_idle();
}

void Store::Impl::set_metadata(const void* data, std::size_t bytes) {
  check_open("set_metadata");
  if (bytes > format::kMaxMetadataBytes) {
    throw InvalidArgumentError("metadata of " + std::to_string(bytes) + " bytes exceeds the limit of " +
                               std::to_string(format::kMaxMetadataBytes) + " bytes");
  }
  if (bytes > 0 && data == nullptr) throw InvalidArgumentError("metadata pointer is null");
  const auto* begin = static_cast<const std::byte*>(data);
  metadata.assign(begin, begin + bytes);
}

std::uint64_t Store::Impl::wanted_buffer_capacity() const {
  return config.buffer.capacity > 0 ? config.buffer.capacity : 2 * registry_.total_bytes();
}

// The buffer is (re)made as soon as the protected set is known so that its
// pages are faulted in while the application computes, not during capture.
void Store::Impl::resize_buffer_if_idle() {
  const std::uint64_t wanted = wanted_buffer_capacity();
  if (wanted == 0 || (buffer_ && buffer_->capacity() == wanted)) return;
  if (buffer_ && !buffer_->empty()) return;
  buffer_.reset();
  buffer_ = std::make_shared<HostBuffer>(wanted);
}

// ------------------------------------------------------------------ errors

void Store::Impl::throw_failure(VersionState& state, int version) {
  if (!state.failure->reported) --unreported_failures_;
  state.failure->reported = true;
  rethrow_as_is(Error(state.failure->code, "version " + std::to_string(version) + " of store '" + name +
                                               "' failed: " + state.failure->message));
}

template <class Prefix>
void Store::Impl::report_failure(std::unique_lock<std::mutex>&, Prefix&& prefix) {
  if (unreported_failures_ == 0) return;  // the common case costs one test
  for (auto& [version, state] : states_) {
    if (state.failure && !state.failure->reported) {
      state.failure->reported = true;
      --unreported_failures_;
      rethrow_as_is(Error(state.failure->code, prefix() + "version " + std::to_string(version) + " of store '" +
                                                   name + "' failed in the background: " + state.failure->message));
    }
  }
}

void Store::Impl::record_failure(int version, int level, const Error& error) {
  log_.error("version " + std::to_string(version) + " not written to L" + std::to_string(level) + ": " + error.what());
  std::lock_guard lock(mutex_);
  VersionState& state = states_[version];
  if (!state.failure) {
    state.failure = Failure{error.code(), "L" + std::to_string(level) + ": " + error.what()};
    ++unreported_failures_;
  }
  state.stats.error = state.failure->message;
}

bool Store::Impl::settled(const VersionState& state, int level) const {
  if (level <= 1) return true;
  if (level == 2) return state.l2_done || state.finished;
  return state.l4_done || state.finished;
}

void Store::Impl::drain(std::unique_lock<std::mutex>& lock) {
  changed_.notify_all();
  changed_.wait(lock, [&] {
    return !eviction_due_ && !evicting_ &&
           std::all_of(states_.begin(), states_.end(), [](const auto& entry) { return entry.second.finished; });
  });
}

// -------------------------------------------------------------- checkpoint

format::Header Store::Impl::make_header(int version) const {
  format::Header header;
  header.store = name;
  header.version = version;
  header.rank = static_cast<std::uint32_t>(rank);
  header.created_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  header.chunk_size = config.pipeline.chunk_size;
  for (const Region& region : registry_.regions()) {
    header.regions.push_back({region.id, region.label, format::RegionKind::kHost, region.bytes, region.type.dtype,
                              region.type.shape});
  }
  header.metadata = metadata;
  return header;
}

void Store::Impl::checkpoint(int version) {
  const Clock::time_point started = Clock::now();
  check_open("checkpoint");
  std::unique_lock lock(mutex_);
  report_failure(lock, [&] {
    return "checkpoint " + std::to_string(version) + " not taken (the store keeps working; call checkpoint again): ";
  });
  if (version < 0) throw InvalidArgumentError("checkpoint: version " + std::to_string(version) + " is negative");
  if (version <= newest_version_) {
    throw InvalidArgumentError("checkpoint: version " + std::to_string(version) + " is not newer than version " +
                               std::to_string(newest_version_) + ", the newest one store '" + name +
                               "' holds; versions must increase (remove newer ones with `resurgo rm`)");
  }
  if (registry_.empty()) {
    throw InvalidArgumentError("checkpoint " + std::to_string(version) + " of store '" + name +
                               "': nothing is protected; call protect first");
  }
  const std::uint64_t total = registry_.total_bytes();
  double backpressure = 0;
  if (!buffer_ || buffer_->capacity() != wanted_buffer_capacity()) {
    const Clock::time_point waited = Clock::now();
    drain(lock);  // the buffer can only be remade once empty
    resize_buffer_if_idle();
    backpressure += seconds_between(waited, Clock::now());
  }
  const bool synchronous = total > buffer_->capacity();
  lock.unlock();
  // The header reads only what the application thread owns: no lock needed.
  Job job{version, make_header(version), {}, nullptr, nullptr};
  if (synchronous) {
    if (!warned_synchronous_) {
      log_.warn("protected state of " + std::to_string(total) + " bytes exceeds buffer.capacity " +
                std::to_string(buffer_->capacity()) + "; checkpoints are written synchronously");
      warned_synchronous_ = true;
    }
    for (const Region& region : registry_.regions()) job.sources.push_back(region.data);
  } else {
    const Clock::time_point waited = Clock::now();
    std::byte* block = buffer_->allocate(total);
    backpressure += seconds_between(waited, Clock::now());
    TraceSpan span(trace_, "capture", version, total);
    try {
      job.sources = capture(block);
    } catch (...) {
      buffer_->release(block);  // the ring would stay full forever
      throw;
    }
    RESURGO_CRASH_POINT("capture.copied", 0);
    job.buffer = buffer_;
    job.block = block;
  }
  lock.lock();
  ++checkpoints_;
  VersionState& state = states_[version];
  state.started = started;
  state.to_l4 = config.persistent.every > 0 && checkpoints_ % config.persistent.every == 0;
  state.stats.version = version;
  state.stats.bytes = total;
  state.stats.synchronous = synchronous;
  state.stats.backpressure_seconds = backpressure;
  newest_version_ = version;
  flush_queue_.push_back(std::move(job));
  changed_.notify_all();
  if (synchronous) {
    changed_.wait(lock, [&] { return settled(state, 2); });
    if (state.failure) throw_failure(state, version);
  }
  state.stats.blocking_seconds = seconds_between(started, Clock::now());
  const auto forgettable = [](const VersionState& old) {
    return old.finished && (!old.failure || old.failure->reported);
  };
  while (states_.size() > kStatsHistory && forgettable(states_.begin()->second)) states_.erase(states_.begin());
}

// One core alone does not reach the memory bandwidth, so the copy is split
// into pieces that the application thread and idle pipeline workers take in
// turn; a busy worker leaves its share to the application thread.
std::vector<const std::byte*> Store::Impl::capture(std::byte* block) {
  struct Piece {
    const std::byte* from;
    std::byte* to;
    std::size_t bytes;
  };
  std::vector<Piece> pieces;
  std::vector<const std::byte*> sources;
  std::byte* cursor = block;
  for (const Region& region : registry_.regions()) {
    sources.push_back(cursor);
    for (std::uint64_t offset = 0; offset < region.bytes; offset += kCapturePiece) {
      pieces.push_back({region.data + offset, cursor + offset, std::min(kCapturePiece, region.bytes - offset)});
    }
    cursor += region.bytes;
  }
  set_capturing(true);
  try {
    pool_->parallel_for(pieces.size(), [&](std::size_t i) { std::memcpy(pieces[i].to, pieces[i].from, pieces[i].bytes); });
  } catch (...) {
    set_capturing(false);  // else evictions, and so drain and close, would wait forever
    throw;
  }
  set_capturing(false);
  return sources;
}

void Store::Impl::set_capturing(bool capturing) {
  {
    std::lock_guard lock(mutex_);
    capturing_ = capturing;
  }
  if (!capturing) changed_.notify_all();
}

// ------------------------------------------------------------ background

void Store::Impl::flush_loop() {
  Trace::name_this_thread("flush L2");
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !flush_queue_.empty(); });
      if (flush_queue_.empty()) return;
      job = std::move(flush_queue_.front());
      flush_queue_.pop_front();
    }
    changed_.notify_all();
    flush(job);
  }
}

// When L4 is slower than L2, versions bound for L4 would pile up on the
// node-local disk, pinned until copied (the stress campaign saw thousands).
// Instead the flush of such a version waits while kMaxL4Backlog older ones
// still wait for their copy: L2 then keeps L4's pace, and once the buffer is
// full the application sees the wait as backpressure.
void Store::Impl::wait_for_l4_backlog(int version) {
  std::unique_lock lock(mutex_);
  const auto state = states_.find(version);
  if (state == states_.end() || !state->second.to_l4) return;
  changed_.wait(lock, [&] { return persist_queue_.size() + (persisting_ >= 0 ? 1u : 0u) < kMaxL4Backlog; });
}

void Store::Impl::flush(Job& job) {
  const int version = job.version;
  std::uint64_t stored_bytes = 0;
  bool written = false;
  wait_for_l4_backlog(version);
  const Clock::time_point write_started = Clock::now();
  try {
    TraceSpan span(trace_, "write L2", version);
    local_.commit(version, [&](WritableFile& file) {
      stored_bytes = write_version(file, job.header, job.sources, config.pipeline, *pool_);
    });
    written = true;
  } catch (const Error& error) {
    record_failure(version, 2, error);
  }
  if (job.buffer) job.buffer->release(job.block);
  {
    std::lock_guard lock(mutex_);
    VersionState& state = states_[version];
    const bool to_l4 = written && state.to_l4;
    if (to_l4) persist_queue_.push_back(version);  // pins the L2 file until copied
    if (written) {
      state.l2_done = true;
      state.stats.stored_bytes = stored_bytes;
      state.stats.l2_write_seconds = seconds_between(write_started, Clock::now());
      state.stats.seconds_to_l2 = seconds_between(state.started, Clock::now());
      eviction_due_ = true;
    }
    state.finished = !to_l4;
  }
  changed_.notify_all();
}

// L2 files still waiting for their L4 copy are pinned. An eviction failure
// costs space, not data: it is logged, and the next eviction retries.
void Store::Impl::evict() {
  const auto waiting_for_l4 = [this](int version) {
    std::lock_guard lock(mutex_);
    return version == persisting_ ||
           std::find(persist_queue_.begin(), persist_queue_.end(), version) != persist_queue_.end();
  };
  const std::pair<DirectoryTier*, std::function<bool(int)>> tiers[] = {{&local_, waiting_for_l4},
                                                                       {&persistent_, [](int) { return false; }}};
  for (const auto& [tier, pinned] : tiers) {
    try {
      tier->evict(pinned);
    } catch (const Error& error) {
      log_.warn("evicting old versions from L" + std::to_string(tier->level()) + ": " + error.what());
    }
  }
}

// The persist thread copies versions to L4 and evicts old files, so that
// neither the application nor the flush thread waits for an unlink (tens of
// milliseconds for a large file on ext4).
void Store::Impl::persist_loop() {
  Trace::name_this_thread("persist L4");
  for (;;) {
    int version = -1;
    {
      std::unique_lock lock(mutex_);
      const auto eviction_now = [&] { return eviction_due_ && !capturing_; };
      changed_.wait(lock, [&] { return stopping_ || !persist_queue_.empty() || eviction_now(); });
      // A due eviction goes first: with L4 behind, the queue is rarely empty,
      // and eviction_due_ is set at most once per commit, so copies wait for
      // one eviction at most.
      if (eviction_now()) {
        eviction_due_ = false;
        evicting_ = true;
      } else if (!persist_queue_.empty()) {
        version = persisting_ = persist_queue_.front();
        persist_queue_.pop_front();
      } else {
        return;
      }
    }
    if (version >= 0) {
      persist(version);
    } else {
      evict();
      {
        std::lock_guard lock(mutex_);
        evicting_ = false;
      }
      changed_.notify_all();
    }
  }
}

void Store::Impl::persist(int version) {
  bool written = false;
  try {
    TraceSpan span(trace_, "copy L2 to L4", version);
    persistent_.commit_copy(version, *local_.open(version));
    written = true;
  } catch (const Error& error) {
    record_failure(version, 4, error);
  }
  {
    std::lock_guard lock(mutex_);
    VersionState& state = states_[version];
    state.l4_done = written;
    if (written) state.stats.seconds_to_l4 = seconds_between(state.started, Clock::now());
    state.finished = true;
    persisting_ = -1;  // unpins the L2 file
    eviction_due_ = true;
  }
  changed_.notify_all();
}

// ------------------------------------------------------------------ queries

void Store::Impl::wait(int version, int level) {
  check_open("wait");
  if (level != 1 && level != 2 && level != 4) {
    throw InvalidArgumentError("wait: level " + std::to_string(level) +
                               " is not a level of this store; use 1 (buffer), 2 (local) or 4 (persistent)");
  }
  if (level == 4 && config.persistent.every == 0) {
    throw InvalidArgumentError("wait: level 4 is disabled for store '" + name + "' (persistent.every = 0)");
  }
  std::unique_lock lock(mutex_);
  if (version == kAllVersions) {
    changed_.wait(lock, [&] {
      return std::all_of(states_.begin(), states_.end(), [&](const auto& e) { return settled(e.second, level); });
    });
    report_failure(lock, [] { return std::string("wait: "); });
    return;
  }
  const auto it = states_.find(version);
  if (it == states_.end()) {
    DirectoryTier& tier = level == 4 ? persistent_ : local_;
    if (level >= 2 && tier.holds(version)) return;
    throw NotFoundError("wait: store '" + name + "' has no version " + std::to_string(version) +
                        (level >= 2 ? " at L" + std::to_string(level) + " (" + tier.dir() + ")" : ""));
  }
  VersionState& state = it->second;
  if (level == 4 && !state.to_l4) {
    throw InvalidArgumentError("wait: version " + std::to_string(version) +
                               " does not go to L4; only every " + std::to_string(config.persistent.every) +
                               "-th checkpoint does (persistent.every)");
  }
  changed_.wait(lock, [&] { return settled(state, level); });
  const bool reached = level <= 1 || (level == 2 ? state.l2_done : state.l4_done);
  if (!reached) throw_failure(state, version);
}

std::map<int, std::vector<int>> Store::Impl::committed_versions() {
  std::map<int, std::vector<int>> levels;
  for (DirectoryTier* tier : {&local_, &persistent_}) {
    for (int version : tier->versions()) levels[version].push_back(tier->level());
  }
  return levels;
}

int Store::Impl::newest_on_disk() {
  const std::map<int, std::vector<int>> committed = committed_versions();
  return committed.empty() ? -1 : committed.rbegin()->first;
}

std::optional<int> Store::Impl::latest() {
  check_open("latest");
  const int newest = newest_on_disk();
  return newest < 0 ? std::nullopt : std::optional<int>(newest);
}

std::vector<VersionInfo> Store::Impl::versions() {
  check_open("versions");
  std::map<int, VersionInfo> found;
  for (auto& [version, levels] : committed_versions()) found[version] = VersionInfo{version, std::move(levels), false};
  std::lock_guard lock(mutex_);
  for (const auto& [version, state] : states_) {
    const bool durable_everywhere = state.l2_done && (!state.to_l4 || state.l4_done);
    if (state.finished || durable_everywhere) continue;
    VersionInfo& info = found[version];
    info.version = version;
    info.pending = true;
    if (!state.l2_done) info.levels.insert(info.levels.begin(), 1);
  }
  std::vector<VersionInfo> list;
  for (auto& [version, info] : found) list.push_back(std::move(info));
  return list;
}

std::vector<VersionStats> Store::Impl::stats() {
  check_open("stats");
  std::lock_guard lock(mutex_);
  std::vector<VersionStats> list;
  for (const auto& [version, state] : states_) list.push_back(state.stats);
  return list;
}

// ------------------------------------------------------------------ restart

void Store::Impl::check_regions(const format::Container& container, const std::string& path, int version,
                                std::vector<std::byte*>& destinations) const {
  const format::Header& header = container.header;
  format::check_identity(container, path, name, version, rank);
  const std::string where = " (version " + std::to_string(version) + ", " + path + ")";
  for (const format::RegionEntry& entry : header.regions) {
    const auto& regions = registry_.regions();
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
    destinations.push_back(it->data);
  }
  for (const Region& region : registry_.regions()) {
    const bool held = std::any_of(header.regions.begin(), header.regions.end(),
                                  [&](const format::RegionEntry& e) { return e.label == region.label; });
    if (!held) {
      throw MismatchError("region '" + region.label + "' is protected but the checkpoint does not hold it" + where);
    }
  }
}

// Reads straight into the protected regions; a damaged chunk leaves them
// partly overwritten, which the caller repairs by restoring another copy.
std::uint64_t Store::Impl::restore(DirectoryTier& tier, int version) {
  TraceSpan span(trace_, "restore from L" + std::to_string(tier.level()), version);
  std::unique_ptr<ReadableFile> file = tier.open(version);
  const format::Container container = format::read_container(*file);
  std::vector<std::byte*> destinations;
  check_regions(container, file->path(), version, destinations);
  pool_->parallel_for(container.chunks.size(), [&](std::size_t i) {
    thread_local std::vector<std::byte> scratch;
    const format::ChunkRecord& chunk = container.chunks[i];
    format::check_chunk_record(*file, container, chunk);  // one 48-byte read per chunk
    format::read_chunk(*file, container, chunk, destinations[chunk.region] + chunk.offset, scratch);
    RESURGO_CRASH_POINT("restore.chunk", tier.level());
  });
  metadata = container.header.metadata;
  std::uint64_t bytes = 0;
  for (const format::RegionEntry& entry : container.header.regions) bytes += entry.bytes;
  return bytes;
}

// Tries every level holding `version`, fastest first. Only a copy that fails
// its checks (checksum, format, identity) counts as damaged: it is rewritten
// from an intact copy, or quarantined when the caller falls back past it. A
// copy that cannot be read (I/O error) proves nothing about its bytes, so if
// no other copy restores the version, restart fails with that StorageError
// instead of rolling back silently.
std::optional<int> Store::Impl::restore_one(int version, bool quarantine_if_damaged) {
  std::vector<DirectoryTier*> damaged;
  std::optional<StorageError> unreadable;
  for (DirectoryTier* tier : {&local_, &persistent_}) {
    if (!tier->holds(version)) continue;
    const Clock::time_point started = Clock::now();
    std::uint64_t bytes = 0;
    try {
      bytes = restore(*tier, version);
    } catch (const NotFoundError&) {
      continue;  // removed since holds(): not a copy any more
    } catch (const MismatchError&) {
      throw;
    } catch (const Error& error) {
      const std::string line = "version " + std::to_string(version) + " at L" + std::to_string(tier->level()) +
                               " skipped: " + error.what();
      log_.warn(line);
      last_restart.skipped.push_back(line);
      if (error.code() == ErrorCode::kStorage) {
        if (!unreadable) unreadable.emplace(error.what());
      } else {
        damaged.push_back(tier);
      }
      continue;
    }
    last_restart.version = version;
    last_restart.level = tier->level();
    last_restart.bytes = bytes;
    last_restart.seconds = seconds_between(started, Clock::now());
    for (DirectoryTier* bad : damaged) {
      try {
        bad->commit_copy(version, *tier->open(version));
        log_.warn("repaired version " + std::to_string(version) + " at L" + std::to_string(bad->level()) +
                  " from the intact copy at L" + std::to_string(tier->level()));
      } catch (const Error& error) {
        log_.warn(std::string("could not repair a damaged copy: ") + error.what());
      }
    }
    return version;
  }
  if (unreadable) {
    throw StorageError("restart: version " + std::to_string(version) + " of store '" + name +
                       "' could not be read (the protected regions may hold part of it; nothing was quarantined): " +
                       unreadable->what() + "; retry, or restart an older version explicitly");
  }
  if (quarantine_if_damaged) {
    for (DirectoryTier* bad : damaged) {
      try {
        bad->quarantine(version);
      } catch (const Error& error) {
        log_.warn(std::string("could not quarantine a damaged copy: ") + error.what());
      }
    }
  }
  return std::nullopt;
}

int Store::Impl::restart(int version) {
  check_open("restart");
  {
    std::unique_lock lock(mutex_);
    drain(lock);
    report_failure(lock, [] { return std::string("restart not done: "); });
  }
  if (version < 0 && version != kLatest) {
    throw InvalidArgumentError("restart: version " + std::to_string(version) + " is negative");
  }
  if (registry_.empty()) throw InvalidArgumentError("restart of store '" + name + "': nothing is protected");
  last_restart = RestartReport{};
  std::vector<int> candidates;
  if (version == kLatest) {
    for (const auto& [held, levels] : committed_versions()) candidates.insert(candidates.begin(), held);  // newest first
  } else if (local_.holds(version) || persistent_.holds(version)) {
    candidates.push_back(version);
  }
  if (candidates.empty()) {
    throw NotFoundError("restart: store '" + name + "' rank " + std::to_string(rank) + " has no " +
                        (version == kLatest ? std::string("checkpoint") : "version " + std::to_string(version)) +
                        " in " + local_.dir() + " or " + persistent_.dir());
  }
  for (int candidate : candidates) {
    if (restore_one(candidate, version == kLatest)) {
      if (!last_restart.skipped.empty()) {
        log_.warn("restarted from version " + std::to_string(candidate) + " after skipping " +
                  std::to_string(last_restart.skipped.size()) + " damaged copies");
      }
      std::lock_guard lock(mutex_);
      newest_version_ = newest_on_disk();  // quarantined versions may be written again
      return candidate;
    }
  }
  std::string causes;
  for (const std::string& line : last_restart.skipped) causes += "\n  " + line;
  throw CorruptionError("restart: no intact copy of " +
                        (version == kLatest ? std::string("any version") : "version " + std::to_string(version)) +
                        " of store '" + name + "':" + causes);
}

// ------------------------------------------------------------- public API

Store::Store(const std::string& name, const Config& config, std::shared_ptr<Env> env)
    : impl_(std::make_unique<Impl>(name, config, std::move(env))) {}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const std::string& Store::name() const { return impl_->name; }
const Config& Store::config() const { return impl_->config; }
int Store::rank() const { return impl_->rank; }
void Store::close() { impl_->close(); }
void Store::protect(int id, void* data, std::size_t bytes, const std::string& label, const ElementType& type) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(data), bytes, type});
}
void Store::unprotect(int id) { impl_->unprotect(id); }
void Store::set_metadata(const void* data, std::size_t bytes) { impl_->set_metadata(data, bytes); }
const std::vector<std::byte>& Store::metadata() const { return impl_->metadata; }
void Store::checkpoint(int version) { impl_->checkpoint(version); }
void Store::wait(int version, int level) { impl_->wait(version, level); }
std::optional<int> Store::latest() { return impl_->latest(); }
int Store::restart(int version) { return impl_->restart(version); }
std::vector<VersionInfo> Store::versions() { return impl_->versions(); }
std::vector<VersionStats> Store::stats() { return impl_->stats(); }
RestartReport Store::last_restart() const { return impl_->last_restart; }

}  // namespace resurgo
