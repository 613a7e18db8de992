// Store: the facade over the seams of DESIGN.md. checkpoint() asks the
// Capture for a Snapshot of the protected regions and hands it to the
// Scheduler, which moves it along the version's route of Levels and records
// outcomes in the Catalog; restart() goes through restore.cpp. A background
// failure is thrown by the next mutating call (or wait) on the store.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "adjoint/prefetcher.h"
#include "capture/capture.h"
#include "capture/device_capture.h"
#include "core/catalog.h"
#include "core/checkpoint_timer.h"
#include "core/log.h"
#include "core/names.h"
#include "core/registry.h"
#include "core/restore.h"
#include "core/trace.h"
#include "format/container.h"
#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "mpi/collective_versions.h"
#include "mpi/comm.h"
#include "mpi/partner_copies.h"
#include "mpi/partner_topology.h"
#include "mpi/redistribution.h"
#include "pipeline/scheduler.h"
#include "pipeline/thread_pool.h"
#include "resurgo/resurgo.hpp"
#include "tier/directory_tier.h"
#include "tier/memory_level.h"

namespace resurgo {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point begin) { return std::chrono::duration<double>(Clock::now() - begin).count(); }

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

// L2's directory: "{node}" in local.path becomes the rank's node number, so
// that the nodes of a job faked on one machine keep apart what real nodes
// would (docs/mpi.md).
std::string local_root(const Config& config, int node) {
  std::string path = config.local.path.empty() ? Config::default_local_path() : config.local.path;
  for (auto at = path.find("{node}"); at != std::string::npos; at = path.find("{node}", at)) {
    path.replace(at, 6, std::to_string(node));
  }
  return absolute(path);
}

// The rank's node: faked by mpi.ranks_per_node, else the communicator's.
int node_of(const Config& config, const Comm& comm) {
  return config.mpi.ranks_per_node > 0 ? comm.rank() / config.mpi.ranks_per_node : comm.node();
}

std::uint64_t memory_capacity(const Config& config) {
  if (config.memory.capacity > 0) return config.memory.capacity;
  const std::uint64_t quarter = quarter_of_physical_memory();
  return quarter > 0 ? quarter : std::uint64_t{1} << 30;
}

}  // namespace

class Store::Impl {
 public:
  // `job`: the communicator of an MPI store; none for a process alone.
  Impl(const std::string& name, const Config& config, std::shared_ptr<Comm> job, std::shared_ptr<Env> env);
  ~Impl();

  void close();
  void protect(Region region);
  void unprotect(int id);
  void reserve(std::uint64_t bytes);
  void set_metadata(const void* data, std::size_t bytes);
  void checkpoint(int version);
  void wait(int version, int level);
  std::optional<int> latest();
  int restart(int version, RestartScope scope);
  VersionDescription describe(int version);
  void persist(int version, int level);
  std::vector<VersionInfo> versions();
  std::vector<VersionStats> stats();
  DeviceStats device_stats() const { return device_ ? device_->stats() : DeviceStats{}; }
  void prefetch(std::vector<int> versions);
  void discard(int version);
  bool need_checkpoint();
  std::optional<double> checkpoint_interval() const;

  std::string name;
  Config config;
  std::shared_ptr<Comm> comm;
  std::vector<std::byte> metadata;
  RestartReport last_restart;

 private:
  void check_open(const char* call) const;
  format::Header make_header(int version) const;
  void check_new_version(int version) const;
  Level* level(int number) const;
  std::vector<Level*> levels() const;  // fastest first
  int newest_committed();
  bool takes_every_checkpoint(const Level& level) const;
  void settle_before_restart(int version);
  void check_not_discarded(int version, const char* call) const;
  void copy_with_bases(int version, Level& target);
  int restore_locally(int version, RestartScope scope);
  void local_checks_before_checkpoint(int version);
  void check_memory_kind(const Region& region);
  // Restart of the device regions, when some are protected (`version`:
  // kLatest, or the version restart reads).
  std::optional<DeviceRestart> restart_of_device_regions(int version);
  void checkpoint_locally(int version);

  // MPI stores (collective_ set): the job's side of each call.
  CollectiveVersions::Hooks job_hooks();
  void hand_to_job(int version, Clock::time_point started, const std::vector<Level*>& route);
  void wait_for_partner_copies(int version);
  void drain_job(const std::string& call, int level);
  std::optional<std::string> job_version_problem(int version);
  std::vector<int> job_candidates(std::vector<std::string>& skipped);
  std::map<int, format::Manifest> redistribution_candidates(std::vector<std::string>& skipped);
  int redistribute_version(const format::Manifest& manifest);
  int restart_job(int version, RestartScope scope);

  std::shared_ptr<Env> env_;
  Logger log_;
  Trace trace_;
  MemoryLevel memory_;
  DirectoryTier local_;
  DirectoryTier persistent_;
  std::atomic<bool> persistent_prepared_{false};  // read by the prefetch thread
  std::unique_ptr<FileLock> lock_;
  Registry registry_;
  Catalog catalog_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Capture> capture_;
  std::unique_ptr<DeviceCapture> device_;  // from the first protect_device()
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<CollectiveVersions> collective_;  // MPI stores only
  bool handed_to_job_ = false;  // the current checkpoint() reached the job
  std::unique_ptr<PartnerCopies> partner_;  // L3 of an MPI store
  std::set<int> discarded_;
  CheckpointTimer timer_;
  Clock::time_point last_checkpoint_end_ = Clock::now();  // or the open
  std::optional<double> checkpoint_cost_;  // seconds checkpoint() blocks, averaged
  int newest_version_ = -1;
  long checkpoints_ = 0;
  long failures_seen_ = 0;  // catalog_.failure_count() at the previous checkpoint
  bool closed_ = false;
};

Store::Impl::Impl(const std::string& store_name, const Config& store_config, std::shared_ptr<Comm> job,
                  std::shared_ptr<Env> env)
    : name(store_name),
      config(store_config),
      comm(job ? job : std::shared_ptr<Comm>(self_comm())),
      env_(env ? std::move(env) : Env::posix()),
      log_(store_name, store_config.log.level),
      trace_(store_config.trace.path),
      memory_(store_name, comm->rank(), memory_capacity(store_config), store_config.memory.keep),
      local_(kL2, local_root(store_config, node_of(store_config, *comm)), store_name, comm->rank(), config.local.mode, config.local.keep, env_),
      persistent_(kL4, absolute(config.persistent.path), store_name, comm->rank(), config.persistent.mode,
                  config.persistent.keep, env_),
      catalog_(store_name),
      timer_(store_config.interval) {
  validate_store_name(name);
  const bool job_store = job != nullptr;
  if (config.interval.policy == IntervalPolicy::kSeconds && config.interval.seconds <= 0) {
    throw ConfigError("store '" + name + "': interval.policy = seconds needs interval.seconds (e.g. \"15min\")");
  }
  const bool forks = config.capture.mode == CaptureMode::kFork || config.capture.mode == CaptureMode::kAuto;
  if (config.memory.every > 0 && forks) {
    throw ConfigError("store '" + name +
                      "': capture.mode = fork (or auto) writes versions from a child process, which cannot fill the "
                      "memory level that memory.every > 0 routes them to; use capture.mode = copy or delta");
  }
  // Made at open, idle until the first prefetch(): the listeners below run
  // on pipeline threads and may not race with its creation.
  prefetcher_ = std::make_unique<Prefetcher>(
      memory_,
      [this] {
        std::vector<Level*> slower = levels();
        slower.erase(slower.begin());  // the memory level itself
        return slower;
      },
      log_, trace_);
  catalog_.on_reached([this] { prefetcher_->poke(); });
  memory_.on_space_freed([this] { prefetcher_->poke(); });
  local_.prepare();
  // L4 is prepared (its directory created) only if it holds versions or a
  // version will go there: a store with L4 off leaves no ./checkpoints behind.
  if (config.persistent.every > 0 || env_->exists(persistent_.dir())) {
    persistent_.prepare();
    persistent_prepared_ = true;
  }
  char lock_name[32];
  std::snprintf(lock_name, sizeof lock_name, "/.lock.r%06d", comm->rank());
  lock_ = env_->lock(local_.dir() + lock_name);
  newest_version_ = newest_committed();
  pool_ = std::make_unique<ThreadPool>(pipeline_thread_count(config) - 1);
  scheduler_ = std::make_unique<Scheduler>(
      std::vector<Scheduler::Step>{
          {&memory_, config.memory.every}, {&local_, config.local.every}, {&persistent_, config.persistent.every}},
      config.pipeline, *pool_, catalog_, log_, trace_);
  capture_ = make_capture(CaptureContext{config, *pool_, log_, [this](bool on) { scheduler_->set_capturing(on); }});
  if (job_store) {
    local_.set_collective();
    persistent_.set_collective();
    collective_ = std::make_unique<CollectiveVersions>(*comm, node_of(config, *comm), name, job_hooks(), log_,
                                                       config.mpi.timeout);
    if (config.partner.scheme != PartnerScheme::kNone) {
      partner_ = std::make_unique<PartnerCopies>(
          config.partner.scheme, PartnerTopology(collective_->nodes(), config.partner.set_size), comm->rank(), name,
          local_, config.local.mode, config.local.keep, config.pipeline.chunk_size, env_, log_);
    }
  } else if (config.partner.scheme != PartnerScheme::kNone) {
    log_.warn("store '" + name + "': partner.scheme is set, but the store has no communicator (L3 is for MPI "
              "stores: open it with one); no L3");
  }
  // L0 is reserved now and mapped while the application computes its first
  // steps (the cache paper's incremental allocation), not at the first
  // protect_device().
  if (config.device.capacity > 0) {
    try {
      device_ = std::make_unique<DeviceCapture>(config, gpu::current_device(config.device.backend), log_);
    } catch (const gpu::GpuError& error) {
      log_.warn("store '" + name + "': device.capacity is set but GPU features are off: " + error.what() +
                "; device regions cannot be protected");
    }
  }
  log_.info("opened store '" + name + "' rank " + std::to_string(comm->rank()) + ": L2 " + local_.dir() +
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
  std::exception_ptr job_failure;
  if (collective_) {
    try {
      drain_job("store closed, but ", kL4);
      scheduler_->request_eviction();  // the manifests just written free older versions
    } catch (...) {
      job_failure = std::current_exception();
    }
    collective_.reset();
  }
  scheduler_.reset();  // drains first
  catalog_.on_reached(nullptr);
  memory_.on_space_freed(nullptr);
  prefetcher_.reset();
  capture_.reset();
  device_.reset();
  closed_ = true;
  lock_.reset();
  if (trace_.enabled()) trace_.write(*env_);
  catalog_.report_failure([] { return std::string("store closed, but "); });
  if (job_failure) std::rethrow_exception(job_failure);
}

Level* Store::Impl::level(int number) const {
  for (Level* candidate : levels()) {
    if (candidate->number() == number) return candidate;
  }
  return nullptr;
}

bool Store::Impl::takes_every_checkpoint(const Level& level) const {
  const int every = &level == &memory_  ? config.memory.every
                    : &level == &local_ ? config.local.every
                                        : config.persistent.every;
  return every == 1;
}

std::vector<Level*> Store::Impl::levels() const {
  std::vector<Level*> list{const_cast<MemoryLevel*>(&memory_), const_cast<DirectoryTier*>(&local_)};
  if (persistent_prepared_) list.push_back(const_cast<DirectoryTier*>(&persistent_));
  return list;
}

// ---------------------------------------------------------------- registry

void Store::Impl::protect(Region region) {
  check_open("protect");
  check_memory_kind(region);
  registry_.add(std::move(region));
  capture_->resize(registry_.host_bytes());
}

// The pointer must be the memory its call says (where the backend can
// tell): a device pointer read as host memory faults, a host pointer given
// to the device copies fails.
void Store::Impl::check_memory_kind(const Region& region) {
  if (region.kind != MemoryKind::kDevice) {
    const std::optional<gpu::PointerInfo> found =
        region.data ? gpu::describe_if_cuda_is_loaded(region.data) : std::nullopt;
    if (found && found->kind == MemoryKind::kDevice) refuse_memory_kind(region, name, found->kind);
    return;
  }
  if (config.capture.mode == CaptureMode::kFork || config.capture.mode == CaptureMode::kAuto) {
    throw InvalidArgumentError("cannot protect device region '" + region.label + "' of store '" + name +
                               "': capture.mode = fork (or auto) writes versions from a child process, which cannot "
                               "reach device memory; use capture.mode = copy or delta");
  }
  if (!device_) device_ = std::make_unique<DeviceCapture>(config, DeviceCapture::device_of(config, region), log_);
  device_->check(region, name);
}

std::optional<DeviceRestart> Store::Impl::restart_of_device_regions(int version) {
  if (!registry_.has_device_regions()) return std::nullopt;
  return std::optional<DeviceRestart>(std::in_place, registry_, *device_, version);
}

void Store::Impl::unprotect(int id) {
  check_open("unprotect");
  registry_.remove(id);
  capture_->unprotected(id);
  capture_->resize(registry_.host_bytes());
}

void Store::Impl::reserve(std::uint64_t bytes) {
  check_open("reserve");
  capture_->resize(std::max(bytes, registry_.host_bytes()));
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

// -------------------------------------------------------------- checkpoint

format::Header Store::Impl::make_header(int version) const {
  format::Header header;
  header.store = name;
  header.version = version;
  header.rank = static_cast<std::uint32_t>(comm->rank());
  header.created_unix_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  header.chunk_size = config.pipeline.chunk_size;
  for (const Region& region : registry_.regions()) {
    header.regions.push_back({region.id, region.label, static_cast<format::RegionKind>(region.kind), region.bytes, region.type.dtype,
                              region.type.shape});
  }
  header.metadata = metadata;
  return header;
}

void Store::Impl::check_new_version(int version) const {
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
}

void Store::Impl::local_checks_before_checkpoint(int version) {
  catalog_.report_failure([&] {
    return "checkpoint " + std::to_string(version) + " not taken (the store keeps working; call checkpoint again): ";
  });
  check_new_version(version);
}

// An MPI store's job takes a step for every checkpoint() call, taken or
// not, so that the ranks' steps match.
void Store::Impl::checkpoint(int version) {
  if (!collective_) return checkpoint_locally(version);
  handed_to_job_ = false;
  try {
    checkpoint_locally(version);
  } catch (...) {
    if (!handed_to_job_) collective_->add_failed(version);
    throw;
  }
}

void Store::Impl::checkpoint_locally(int version) {
  const Clock::time_point started = Clock::now();
  check_open("checkpoint");
  const long failures = catalog_.failure_count();
  if (failures != failures_seen_) capture_->start_new_chain("an earlier version failed");
  failures_seen_ = failures;
  if (collective_) {
    collective_->report_failure("checkpoint " + std::to_string(version) + " not taken: an earlier version failed "
                                "for the job (the store keeps working; call checkpoint again): ");
  }
  local_checks_before_checkpoint(version);
  std::vector<Level*> route = scheduler_->route(checkpoints_ + 1);
  if (!persistent_prepared_ && std::count(route.begin(), route.end(), &persistent_) > 0) {
    persistent_.prepare();
    persistent_prepared_ = true;
  }
  // A delta's base must be on every level the delta goes to: only a level
  // that takes every checkpoint holds it for sure.
  for (Level* level : route) {
    if (takes_every_checkpoint(*level)) continue;
    capture_->start_new_chain("it goes to L" + std::to_string(level->number()) +
                              ", which does not take every checkpoint");
  }
  CaptureTimes times;
  Snapshot snapshot = [&] {
    TraceSpan span(trace_, "capture", version, registry_.total_bytes());
    if (!registry_.has_device_regions()) {
      return capture_->take(registry_.regions(), make_header(version), *route.front(), times);
    }
    return device_->take(*capture_, registry_.regions(), make_header(version), *route.front(), times);
  }();
  ++checkpoints_;
  newest_version_ = version;
  VersionStats captured;
  captured.bytes = registry_.total_bytes();
  captured.base_version = static_cast<int>(snapshot.header.base_version);
  captured.capture = captured.base_version >= 0 ? "delta"
                     : snapshot.synchronous     ? "synchronous"
                                                : capture_->mode(captured.bytes);
  captured.captured_bytes = total_bytes(snapshot.extents);
  captured.dirty_bytes = snapshot.tracking.dirty_bytes;
  captured.granularity_bytes = snapshot.tracking.granularity_bytes;
  captured.tracker = snapshot.tracking.tracker;
  captured.backpressure_seconds = times.backpressure_seconds;
  captured.first_touch_seconds = times.first_touch_seconds;
  captured.copy_seconds = times.copy_seconds;
  captured.device_bytes = times.device_bytes;
  captured.device_path = times.device_bytes == 0 ? "" : times.device_into_l0 ? "l0" : "host";
  captured.device_wait_seconds = times.device_wait_seconds;
  std::vector<int> route_numbers;
  for (Level* level : route) route_numbers.push_back(level->number());
  catalog_.add(version, started, route_numbers, captured);
  const bool synchronous = snapshot.synchronous;
  const int first_level = route.front()->number();
  if (collective_) {
    hand_to_job(version, started, route);
    handed_to_job_ = true;
  }
  scheduler_->submit(version, std::move(route), std::move(snapshot));
  if (synchronous) catalog_.wait(version, first_level);
  const double blocked = seconds_since(started);
  catalog_.set_blocking(version, blocked);
  // A moving average (a quarter on the newest) so that one slow checkpoint
  // does not swing the interval.
  checkpoint_cost_ = checkpoint_cost_ ? 0.75 * *checkpoint_cost_ + 0.25 * blocked : blocked;
  last_checkpoint_end_ = Clock::now();
}

// ------------------------------------------------------------------ queries

void Store::Impl::wait(int version, int level_number) {
  check_open("wait");
  if (level_number == kL3 && partner_) return wait_for_partner_copies(version);
  if (level_number != kL1 && level_number != kL2 && level_number != kL4) {
    throw InvalidArgumentError("wait: level " + std::to_string(level_number) +
                               " is not a level of this store; use 1 (buffer), 2 (local) or 4 (persistent), and 3 "
                               "(partner) for an MPI store with partner.scheme set");
  }
  if (level_number == kL4 && config.persistent.every == 0) {
    throw InvalidArgumentError("wait: level 4 is disabled for store '" + name + "' (persistent.every = 0)");
  }
  if (level_number == kL2 && config.local.every == 0) {
    throw InvalidArgumentError("wait: level 2 is disabled for store '" + name + "' (local.every = 0)");
  }
  if (collective_) drain_job("wait: ", level_number);
  if (version == kAllVersions) {
    catalog_.wait_all(level_number);
    if (collective_ && collective_->take_failures(level_number)) {
      throw StorageError("wait: a version of store '" + name + "' did not reach L" + std::to_string(level_number) +
                         " on every rank; the ranks where it failed say why");
    }
    return;
  }
  if (!catalog_.known(version)) {
    Level* held = level(level_number);
    if (held != nullptr && held->holds(version)) return;
    throw NotFoundError("wait: store '" + name + "' has no version " + std::to_string(version) +
                        (held != nullptr ? " at L" + std::to_string(level_number) + " (" + held->where() + ")" : ""));
  }
  if (level_number >= kL2 && !catalog_.routed(version, level_number)) {
    const int every = level_number == kL4 ? config.persistent.every : config.local.every;
    throw InvalidArgumentError("wait: version " + std::to_string(version) + " does not go to L" +
                               std::to_string(level_number) + "; only every " + std::to_string(every) +
                               "-th checkpoint does (" + (level_number == kL4 ? "persistent" : "local") + ".every)");
  }
  catalog_.wait(version, level_number);
  if (collective_ && collective_->failed(version, level_number)) {
    throw StorageError("wait: version " + std::to_string(version) + " of store '" + name + "' did not reach L" +
                       std::to_string(level_number) + " on every rank; the ranks where it failed say why");
  }
}

int Store::Impl::newest_committed() {
  const std::map<int, std::vector<int>> committed = committed_versions(levels());
  return committed.empty() ? -1 : committed.rbegin()->first;
}

std::optional<int> Store::Impl::latest() {
  check_open("latest");
  if (collective_) {
    drain_job("latest: ", kL4);
    std::vector<std::string> skipped;
    std::vector<int> candidates = job_candidates(skipped);
    for (const auto& [version, manifest] : redistribution_candidates(skipped)) candidates.push_back(version);
    const int agreed = collective_->agree_newest(candidates);
    return agreed < 0 ? std::nullopt : std::optional<int>(agreed);
  }
  const std::map<int, std::vector<int>> committed = committed_versions(levels());
  for (auto version = committed.rbegin(); version != committed.rend(); ++version) {
    if (discarded_.count(version->first) == 0) return version->first;
  }
  return std::nullopt;
}

std::vector<VersionInfo> Store::Impl::versions() {
  check_open("versions");
  std::map<int, VersionInfo> found;
  for (auto& [version, held] : committed_versions(levels())) found[version] = VersionInfo{version, std::move(held), false};
  for (const auto& [version, only_in_buffer] : catalog_.pending()) {
    VersionInfo& info = found[version];
    info.version = version;
    info.pending = true;
    if (only_in_buffer && (info.levels.empty() || info.levels.front() != kL1)) {
      info.levels.insert(info.levels.begin(), kL1);
    }
  }
  std::vector<VersionInfo> list;
  for (auto& [version, info] : found) {
    if (discarded_.count(version) == 0) list.push_back(std::move(info));
  }
  return list;
}

std::vector<VersionStats> Store::Impl::stats() {
  check_open("stats");
  std::vector<VersionStats> list = catalog_.stats();
  if (!partner_) return list;
  for (VersionStats& version : list) {
    const std::optional<PartnerCopies::Outcome> outcome = partner_->outcome(version.version);
    if (!outcome) continue;
    LevelStats level{kL3, outcome->error.empty() ? outcome->seconds_to_level : -1, outcome->stored_bytes,
                     outcome->write_seconds};
    version.levels.insert(std::find_if(version.levels.begin(), version.levels.end(),
                                       [](const LevelStats& other) { return other.level > kL3; }),
                          level);
    if (!outcome->error.empty() && version.error.empty()) version.error = "L3: " + outcome->error;
  }
  return list;
}

// wait(v, 3): the job's L2 step for the version (which protects it on L3)
// has run; every rank learns whether every rank's protection succeeded.
void Store::Impl::wait_for_partner_copies(int version) {
  drain_job("wait: ", kL2);
  std::vector<int> versions{version};
  if (version == kAllVersions) {
    versions.clear();
    for (const VersionStats& stats : catalog_.stats()) versions.push_back(stats.version);
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
  if (collective_->on_every_rank(failure.empty())) return;
  throw StorageError("wait: L3 of store '" + name + "': " +
                     (failure.empty() ? std::string("another rank's protection failed (its error says why)") : failure));
}

// ------------------------------------------------------------------ restart

void Store::Impl::check_not_discarded(int version, const char* call) const {
  if (discarded_.count(version) == 0) return;
  throw NotFoundError(std::string(call) + ": version " + std::to_string(version) + " of store '" + name +
                      "' was discarded (consumed); restart another version, or checkpoint the state again");
}

// A restart of the newest version must see every pending one settled; a
// restart of a given version waits only for that version's first write (an
// adjoint's backward pass restores while later versions are still written).
void Store::Impl::settle_before_restart(int version) {
  if (version == kLatest) {
    scheduler_->drain();
  } else {
    catalog_.wait_first_level(version);
  }
}

int Store::Impl::restart(int version, RestartScope scope) {
  check_open("restart");
  if (version < 0 && version != kLatest) {
    throw InvalidArgumentError("restart: version " + std::to_string(version) + " is negative");
  }
  if (version != kLatest) check_not_discarded(version, "restart");
  if (collective_) return restart_job(version, scope);
  settle_before_restart(version);
  catalog_.report_failure([] { return std::string("restart not done: "); });
  if (registry_.empty()) throw InvalidArgumentError("restart of store '" + name + "': nothing is protected");
  return restore_locally(version, scope);
}

int Store::Impl::restore_locally(int version, RestartScope scope) {
  const std::optional<std::string> prefetch_failure =
      version != kLatest ? prefetcher_->settle(version) : std::nullopt;
  const std::vector<Level*> held = levels();
  std::optional<DeviceRestart> device_restart = restart_of_device_regions(version);
  const Registry& targets = device_restart ? device_restart->registry() : registry_;
  const RestoreContext context{name, comm->rank(), held, targets, *pool_, log_, trace_, scope};
  capture_->restarting(true);
  try {
    const int restored = restore_version(context, version, last_restart, metadata);
    last_restart.bytes_from_device_cache = device_restart ? device_restart->write_back() : 0;
    prefetcher_->restored(restored);
    if (prefetch_failure) {
      last_restart.skipped.push_back("version " + std::to_string(version) + ": " + *prefetch_failure +
                                     "; read from L" + std::to_string(last_restart.level) + " instead");
    }
    capture_->restarting(false);
    newest_version_ = newest_committed();  // quarantined versions may be written again
    return restored;
  } catch (...) {
    capture_->restarting(false);
    throw;
  }
}

// ------------------------------------------------------------ MPI job
// The store's side of CollectiveVersions: what every rank checks and
// reports at the calls the job makes together.

// The job's steps ask the catalog (or, for a version it no longer keeps,
// the level itself) how this rank's copy fares.
CollectiveVersions::Hooks Store::Impl::job_hooks() {
  CollectiveVersions::Hooks hooks;
  hooks.outcome = [this](int version, int level_number) {
    if (const std::optional<int> known = catalog_.outcome(version, level_number)) return *known;
    return level(level_number)->holds(version) ? 1 : -1;
  };
  hooks.settle = [this](int version, int level_number) { catalog_.wait_settled(version, level_number); };
  hooks.complete_at_local = [this](int version, Clock::time_point started, Comm& job) {
    if (partner_) partner_->protect(version, started, job);
  };
  return hooks;
}

void Store::Impl::hand_to_job(int version, Clock::time_point started, const std::vector<Level*>& route) {
  std::vector<format::ManifestRegion> layout;
  for (const Region& region : registry_.regions()) {
    layout.push_back({comm->rank(), region.id, region.label, region.type.dtype, region.bytes, region.type.shape,
                      region.block.global_shape, region.block.offset});
  }
  std::vector<DirectoryTier*> directories;
  for (Level* level : route) {
    if (level == &local_ || level == &persistent_) directories.push_back(static_cast<DirectoryTier*>(level));
  }
  collective_->add(version, started, std::move(directories), std::move(layout));
}

// Every version handed over is decided for the job at L2 (and at L4 when
// `level` is 4); its failures are thrown.
void Store::Impl::drain_job(const std::string& call, int level) {
  collective_->drain(level == kL4);
  collective_->report_failure(call);
}

// Empty when `version` is a version of the job this rank can restore: a
// directory level holds its manifest for this job size, and a copy here is
// the file the manifest names (same header+index checksum). Else why not;
// none when the version was written by another rank count (which
// redistribution_candidates() judges).
std::optional<std::string> Store::Impl::job_version_problem(int version) {
  std::string problem = "no job manifest (the job did not commit it: a rank failed before every rank had written it)";
  for (DirectoryTier* directory : {&local_, &persistent_}) {
    if (directory == &persistent_ && !persistent_prepared_) continue;
    try {
      const std::optional<std::string> text = directory->read_manifest(version);
      if (!text) continue;
      const format::Manifest manifest =
          format::decode_manifest(*text, directory->dir() + "/" + format::manifest_file_name(version));
      if (manifest.ranks != comm->size()) return std::nullopt;
      const std::uint64_t expected = manifest.files[static_cast<std::size_t>(comm->rank())].checksum;
      for (Level* copy : levels()) {
        if (!copy->holds(version)) continue;
        try {
          if (format::read_container(*copy->open(version)).checksum == expected) return "";
        } catch (const Error&) {
        }
      }
      problem = "this rank's files differ from the one the job committed (files of another job?)";
    } catch (const Error& error) {
      problem = error.what();
    }
  }
  return problem;
}

std::vector<int> Store::Impl::job_candidates(std::vector<std::string>& skipped) {
  std::vector<int> candidates;
  for (const auto& [version, held] : committed_versions(levels())) {
    if (discarded_.count(version) != 0) continue;
    const std::optional<std::string> problem = job_version_problem(version);
    if (problem && problem->empty()) {
      candidates.push_back(version);
    } else if (problem) {
      skipped.push_back("version " + std::to_string(version) + " (rank " + std::to_string(comm->rank()) +
                        "): " + *problem);
    }
  }
  return candidates;
}

// The newest version every rank can restore, restored on every rank; a
// version some rank fails to restore is dropped by all and the next one
// tried (kLatest), or fails on every rank (a given version).
int Store::Impl::restart_job(int version, RestartScope scope) {
  settle_before_restart(kLatest);
  drain_job("restart: ", kL4);
  PartnerCopies::Rebuild rebuild;
  if (partner_) rebuild = partner_->rebuild(*comm);
  if (comm->rank() == 0) {
    for (const std::string& note : rebuild.notes) log_.warn(note);
  }
  std::vector<std::string> skipped;
  std::vector<int> candidates = job_candidates(skipped);
  const std::map<int, format::Manifest> other_rank_count = redistribution_candidates(skipped);
  for (const auto& [other, manifest] : other_rank_count) candidates.push_back(other);
  if (version != kLatest) {
    candidates.assign(std::count(candidates.begin(), candidates.end(), version), version);
  }
  for (;;) {
    const int agreed = collective_->agree_newest(candidates);
    if (agreed < 0) {
      std::string why;
      for (const std::string& line : skipped) why += "; " + line;
      throw NotFoundError("restart of store '" + name + "': " +
                          (version == kLatest ? std::string("no version") : "version " + std::to_string(version) + " is not one") +
                          " that every rank of the job can restore" + why);
    }
    std::exception_ptr failure;
    std::string cause = "another rank could not restore it";
    int restored = -1;
    try {
      if (registry_.empty()) throw InvalidArgumentError("restart of store '" + name + "': nothing is protected");
      const auto written_by_others = other_rank_count.find(agreed);
      restored = written_by_others == other_rank_count.end() ? restore_locally(agreed, scope)
                                                             : redistribute_version(written_by_others->second);
    } catch (const std::exception& error) {
      failure = std::current_exception();
      cause = error.what();
    }
    if (collective_->on_every_rank(!failure)) {
      last_restart.skipped.insert(last_restart.skipped.begin(), skipped.begin(), skipped.end());
      last_restart.rebuilt = rebuild.notes;
      last_restart.rebuild_seconds = rebuild.seconds;
      return restored;
    }
    if (version != kLatest) {
      if (failure) std::rethrow_exception(failure);
      throw StateError("restart of store '" + name + "': version " + std::to_string(version) +
                       " could not be restored on every rank (" + cause + ")");
    }
    skipped.push_back("version " + std::to_string(agreed) + ": not restorable on every rank (" + cause + ")");
    candidates.erase(std::remove(candidates.begin(), candidates.end(), agreed), candidates.end());
  }
}

// Versions whose L4 manifest names another rank count and whose regions
// hold every region protected here as a block of the same global array.
std::map<int, format::Manifest> Store::Impl::redistribution_candidates(std::vector<std::string>& skipped) {
  std::map<int, format::Manifest> candidates;
  if (!persistent_prepared_) return candidates;
  for (int version : persistent_.manifest_versions()) {
    if (discarded_.count(version) != 0) continue;
    const std::string path = persistent_.dir() + "/" + format::manifest_file_name(version);
    try {
      const std::optional<std::string> text = persistent_.read_manifest(version);
      if (!text) continue;
      format::Manifest manifest = format::decode_manifest(*text, path);
      if (manifest.ranks == comm->size()) continue;  // a version of this rank count: job_candidates()
      const std::string problem = redistribution_problem(manifest, registry_.regions());
      if (problem.empty()) {
        candidates.emplace(version, std::move(manifest));
      } else {
        skipped.push_back("version " + std::to_string(version) + " (written by " + std::to_string(manifest.ranks) +
                          " ranks): " + problem);
      }
    } catch (const Error& error) {
      skipped.push_back("version " + std::to_string(version) + ": " + error.what());
    }
  }
  return candidates;
}

int Store::Impl::redistribute_version(const format::Manifest& manifest) {
  const Clock::time_point started = Clock::now();
  std::optional<DeviceRestart> device_restart = restart_of_device_regions(kLatest);
  const Registry& targets = device_restart ? device_restart->registry() : registry_;
  capture_->restarting(true);
  try {
    const RedistributionReport report = redistribute(manifest, persistent_.dir(), targets.regions(), *env_);
    if (device_restart) device_restart->write_back();
    capture_->restarting(false);
    metadata = report.metadata;
    last_restart = RestartReport{};
    last_restart.version = manifest.version;
    last_restart.level = kL4;
    last_restart.seconds = seconds_since(started);
    last_restart.bytes = report.bytes_restored;
    last_restart.bytes_read = report.bytes_read;
    last_restart.written_by_ranks = manifest.ranks;
    last_restart.chain = {manifest.version};
    newest_version_ = std::max(newest_committed(), manifest.version);  // the next version must be newer
    return manifest.version;
  } catch (...) {
    capture_->restarting(false);
    throw;
  }
}

// -------------------------------------------------- describe and persist

VersionDescription Store::Impl::describe(int version) {
  check_open("describe");
  check_not_discarded(version, "describe");
  if (catalog_.known(version)) catalog_.wait_first_level(version);
  std::string damage;
  for (Level* candidate : levels()) {
    if (!candidate->holds(version)) continue;
    try {
      const std::unique_ptr<ReadableFile> file = candidate->open(version);
      const format::Container container = format::read_container(*file);
      format::check_identity(container, file->path(), name, version, comm->rank());
      VersionDescription description{version, {}, container.header.metadata};
      for (const format::RegionEntry& entry : container.header.regions) {
        description.regions.push_back({entry.id, entry.label, entry.bytes, ElementType{entry.dtype, entry.shape},
                                       static_cast<MemoryKind>(entry.kind)});
      }
      return description;
    } catch (const Error& error) {
      if (error.code() != ErrorCode::kCorrupt && error.code() != ErrorCode::kFormat) throw;
      damage += (damage.empty() ? "" : "; ") + std::string(error.what());
    }
  }
  if (damage.empty()) {
    throw NotFoundError("describe: store '" + name + "' has no version " + std::to_string(version));
  }
  throw CorruptionError("describe: every copy of version " + std::to_string(version) + " of store '" + name +
                        "' is damaged: " + damage);
}

// A delta's bases go first: `target` never holds a delta it cannot restore.
void Store::Impl::copy_with_bases(int version, Level& target) {
  if (target.holds(version)) return;
  for (Level* source : levels()) {
    if (source == &target || !source->holds(version)) continue;
    if (const std::optional<int> base = source->base_of(version)) copy_with_bases(*base, target);
    target.commit_copy(version, *source->open(version));
    return;
  }
  throw NotFoundError("persist: store '" + name + "' holds no copy of version " + std::to_string(version) +
                      " to copy to " + target.where());
}

void Store::Impl::persist(int version, int level_number) {
  check_open("persist");
  if (level_number != kL2 && level_number != kL4) {
    throw InvalidArgumentError("persist: level " + std::to_string(level_number) +
                               " is not a directory level; use 2 (local) or 4 (persistent)");
  }
  check_not_discarded(version, "persist");
  if (catalog_.known(version)) catalog_.wait_first_level(version);
  if (level_number == kL4 && !persistent_prepared_) {
    persistent_.prepare();
    persistent_prepared_ = true;
  }
  copy_with_bases(version, level_number == kL2 ? static_cast<Level&>(local_) : persistent_);
}

// ---------------------------------------------------------- adjoint staging

void Store::Impl::prefetch(std::vector<int> versions) {
  check_open("prefetch");
  for (int version : versions) {
    if (version < 0) throw InvalidArgumentError("prefetch: version " + std::to_string(version) + " is negative");
    check_not_discarded(version, "prefetch");
  }
  prefetcher_->set_order(std::move(versions));
}

void Store::Impl::discard(int version) {
  check_open("discard");
  if (version < 0) throw InvalidArgumentError("discard: version " + std::to_string(version) + " is negative");
  if (discarded_.count(version) != 0) {
    throw StateError("discard: version " + std::to_string(version) + " of store '" + name +
                     "' was already discarded");
  }
  bool held = catalog_.known(version);
  std::string where;
  for (Level* level : levels()) {
    held = held || level->holds(version);
    where += (where.empty() ? "" : ", ") + level->where();
  }
  if (!held) {
    throw NotFoundError("discard: store '" + name + "' has no version " + std::to_string(version) + " (looked in " +
                        where + ")");
  }
  discarded_.insert(version);
  prefetcher_->forget(version);
  memory_.remove(version);  // its room is free at once for the next prefetch
  scheduler_->discard(version);
}

// ------------------------------------------------------- checkpoint interval

bool Store::Impl::need_checkpoint() {
  check_open("need_checkpoint");
  if (config.interval.policy == IntervalPolicy::kNone) {
    throw StateError("need_checkpoint: store '" + name +
                     "' has no checkpoint interval policy; set interval.policy to seconds, overhead or young-daly "
                     "(docs/interval.md)");
  }
  return timer_.due(seconds_since(last_checkpoint_end_), checkpoint_cost_);
}

std::optional<double> Store::Impl::checkpoint_interval() const { return timer_.interval(checkpoint_cost_); }

// ------------------------------------------------------------- public API

Store::Store(const std::string& name, const Config& config, std::shared_ptr<Env> env)
    : impl_(std::make_unique<Impl>(name, config, nullptr, std::move(env))) {}
Store::Store(const std::string& name, const Config& config, std::shared_ptr<Comm> comm, std::shared_ptr<Env> env)
    : impl_(std::make_unique<Impl>(name, config, std::move(comm), std::move(env))) {
  if (!impl_->comm) throw InvalidArgumentError("store '" + name + "': the communicator is null");
}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

Comm& comm_of(Store& store) { return *store.impl_->comm; }

const std::string& Store::name() const { return impl_->name; }
const Config& Store::config() const { return impl_->config; }
int Store::rank() const { return impl_->comm->rank(); }
void Store::close() { impl_->close(); }
void Store::protect(int id, void* data, std::size_t bytes, const std::string& label, const ElementType& type,
                    const GlobalBlock& block) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(data), bytes, type, block});
}
void Store::protect_device(int id, void* device_data, std::size_t bytes, const std::string& label,
                           const ElementType& type) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(device_data), bytes, type, {}, MemoryKind::kDevice});
}
void Store::protect_managed(int id, void* data, std::size_t bytes, const std::string& label, const ElementType& type) {
  impl_->protect(Region{id, label, static_cast<std::byte*>(data), bytes, type, {}, MemoryKind::kManaged});
}
void Store::unprotect(int id) { impl_->unprotect(id); }
void Store::reserve(std::uint64_t bytes) { impl_->reserve(bytes); }
void Store::set_metadata(const void* data, std::size_t bytes) { impl_->set_metadata(data, bytes); }
const std::vector<std::byte>& Store::metadata() const { return impl_->metadata; }
void Store::checkpoint(int version) { impl_->checkpoint(version); }
void Store::wait(int version, int level) { impl_->wait(version, level); }
std::optional<int> Store::latest() { return impl_->latest(); }
int Store::restart(int version, RestartScope scope) { return impl_->restart(version, scope); }
VersionDescription Store::describe(int version) { return impl_->describe(version); }
void Store::persist(int version, int level) { impl_->persist(version, level); }
std::vector<VersionInfo> Store::versions() { return impl_->versions(); }
std::vector<VersionStats> Store::stats() { return impl_->stats(); }
RestartReport Store::last_restart() const { return impl_->last_restart; }
DeviceStats Store::device_stats() const { return impl_->device_stats(); }
void Store::prefetch(const std::vector<int>& versions) { impl_->prefetch(versions); }
void Store::discard(int version) { impl_->discard(version); }
bool Store::need_checkpoint() { return impl_->need_checkpoint(); }
std::optional<double> Store::checkpoint_interval() const { return impl_->checkpoint_interval(); }

}  // namespace resurgo
