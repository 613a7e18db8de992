// Store: the facade over the seams of DESIGN.md; it conducts them and
// branches on neither MPI nor GPU. checkpoint() asks the Capture (which
// takes device regions itself) for a Snapshot of the protected regions,
// records it in the Catalog, hands it to the Job and to the Scheduler, which
// moves it along the levels the Route gives; restart() asks the Job, handing
// it the restore steps (restore.cpp). A background failure is thrown by the
// next mutating call (or wait) on the store. In a child forked while the
// store is open, only close() and the destructor may be called, and do
// nothing (owner_process.h).
#include <algorithm>
#include <optional>

#include "base/clock.h"
#include "base/log.h"
#include "base/names.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "capture/capture.h"
#include "core/catalog.h"
#include "core/checkpoint_timer.h"
#include "core/config_checks.h"
#include "core/registry.h"
#include "format/container.h"
#include "format/file_names.h"
#include "job/job.h"
#include "job/self_comm.h"
#include "pipeline/prefetcher.h"
#include "pipeline/scheduler.h"
#include "resurgo/resurgo.hpp"
#include "store/owner_process.h"
#include "store/restart_steps.h"
#include "store/restore.h"
#include "tier/route.h"

namespace resurgo {

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
  std::optional<int> latest() {
    check_open("latest");
    return job_->latest();
  }
  int restart(int version, RestartScope scope);
  VersionDescription describe(int version);
  void persist(int version, int level);
  std::vector<VersionInfo> versions() {
    check_open("versions");
    return list_versions(route_.readable(), catalog_);
  }
  std::vector<VersionStats> stats();
  DeviceStats device_stats() const {
    check_process("device_stats");
    return capture_ ? capture_->device_stats() : DeviceStats{};
  }
  void prefetch(std::vector<int> versions);
  void discard(int version);
  bool need_checkpoint();
  std::optional<double> checkpoint_interval() const {
    check_process("checkpoint_interval");
    return timer_.interval();
  }
  // Whether this process is a child forked while the store was open.
  bool inherited() const { return owner_.inherited(); }

  std::string name;
  Config config;
  std::shared_ptr<Comm> comm;
  std::vector<std::byte> metadata;
  RestartReport last_restart;

 private:
  void check_process(const char* call) const { owner_.check(call, name); }
  void check_open(const char* call) const;
  void check_version(int version, const char* call);
  void check_new_version(int version) const;
  Snapshot capture(int version, const std::vector<Level*>& route, CaptureTimes& times);
  void submit(int version, Clock::time_point started, std::vector<Level*> route, Snapshot snapshot);
  int newest_committed();
  // Whose versions restart and describe read (restart.accept_foreign).
  StoreIdentity identity() const { return {name, route_.identity(), config.restart.accept_foreign}; }

  const OwnerProcess owner_;
  std::shared_ptr<Env> env_;
  Logger log_;
  Trace trace_;
  Route route_;
  Registry registry_;
  Catalog catalog_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Capture> capture_;
  std::unique_ptr<Prefetcher> prefetcher_;
  std::unique_ptr<Job> job_;
  CheckpointTimer timer_;
  int newest_version_ = -1;
  long checkpoints_ = 0;
  long failures_seen_ = 0;  // catalog_.failure_count() at the previous checkpoint
  bool closed_ = false;
};

Store::Impl::Impl(const std::string& store_name, const Config& store_config, std::shared_ptr<Comm> job,
                  std::shared_ptr<Env> env)
    : name(validate_store_name(store_name)),  // before the route makes directories
      config(check_store_config(name, store_config)),  // before the route locks its directories
      comm(job ? job : std::shared_ptr<Comm>(self_comm())),
      env_(env ? std::move(env) : Env::posix()),
      log_(store_name, store_config.log.level),
      trace_(store_config.trace.path),
      route_(store_name, comm->rank(), node_of(config, *comm), config, env_, log_),
      catalog_(store_name),
      timer_(store_config.interval) {
  newest_version_ = newest_committed();
  pool_ = std::make_unique<ThreadPool>(pipeline_thread_count(config) - 1);
  scheduler_ = std::make_unique<Scheduler>(route_.scheduled(), config.pipeline, *pool_, catalog_, log_, trace_);
  capture_ = make_capture(CaptureContext{config, *pool_, log_, [this](bool on) { scheduler_->set_capturing(on); },
                                         route_.device()});
  // Made at open, idle until the first prefetch(): the listeners below run
  // on pipeline threads and may not race with its creation.
  prefetcher_ = std::make_unique<Prefetcher>(
      route_.memory(), [this] { return route_.readable_after(kL1); }, log_, trace_);
  catalog_.on_reached([this] { prefetcher_->poke(); });
  route_.memory().on_space_freed([this] { prefetcher_->poke(); });
  job_ = make_job(JobContext{name, config, *comm, node_of(config, *comm), route_, catalog_, *scheduler_, registry_,
                             log_, env_},
                  job != nullptr);
  log_.info("opened store '" + name + "' rank " + std::to_string(comm->rank()) + ": L2 " + route_.local().dir() +
            (config.persistent.every > 0 ? ", L4 " + route_.persistent().dir() : ", L4 disabled"));
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
  check_process(call);
  if (closed_) throw StateError(std::string(call) + " on store '" + name + "': the store is closed");
}

// Every version is decided for the job first; the pipeline then drains. In
// a forked child there is nothing to drain: the pipeline is the parent's.
void Store::Impl::close() {
  if (closed_ || inherited()) return;
  std::exception_ptr job_failure;
  try {
    job_->close();
  } catch (...) {
    job_failure = std::current_exception();
  }
  scheduler_.reset();
  catalog_.on_reached(nullptr);
  route_.memory().on_space_freed(nullptr);
  prefetcher_.reset();
  capture_.reset();
  route_.close();
  closed_ = true;
  if (trace_.enabled()) trace_.write(*env_);
  catalog_.report_failure([] { return std::string("store closed, but "); });
  if (job_failure) std::rethrow_exception(job_failure);
}

// ---------------------------------------------------------------- registry

// A protect that fails leaves nothing registered: the same id and label
// can be protected again once the cause is gone.
void Store::Impl::protect(Region region) {
  check_open("protect");
  capture_->check(region, name);
  const int id = region.id;
  registry_.add(std::move(region));
  try {
    capture_->resize(registry_.host_bytes());
  } catch (...) {
    registry_.remove(id);
    throw;
  }
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

// ---------------------------------------------------------------- checkpoint

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

// The job takes a step for every checkpoint() call, taken or not.
void Store::Impl::checkpoint(int version) {
  const Clock::time_point started = Clock::now();
  std::vector<Level*> route;
  Snapshot snapshot;
  CaptureTimes times;
  try {
    check_open("checkpoint");
    job_->before_checkpoint(version);
    catalog_.report_failure([&] {
      return "checkpoint " + std::to_string(version) + " not taken (the store keeps working; call checkpoint again): ";
    });
    check_new_version(version);
    route = route_.levels_for(checkpoints_ + 1);
    snapshot = capture(version, route, times);
  } catch (...) {
    if (!closed_) job_->checkpoint_failed(version);
    throw;
  }
  catalog_.add(version, started, level_numbers(route),
               capture_stats(snapshot, times, registry_.total_bytes(), capture_->mode(registry_.total_bytes())));
  job_->checkpointed(version, started, route);
  submit(version, started, std::move(route), std::move(snapshot));
}

// A delta's base must be on every level the delta goes to: only a level
// that takes every checkpoint holds it for sure.
Snapshot Store::Impl::capture(int version, const std::vector<Level*>& route, CaptureTimes& times) {
  const long failures = catalog_.failure_count();
  if (failures != failures_seen_) capture_->start_new_chain("an earlier version failed");
  failures_seen_ = failures;
  for (Level* level : route) {
    if (route_.takes_every_checkpoint(*level)) continue;
    capture_->start_new_chain("it goes to L" + std::to_string(level->number()) +
                              ", which does not take every checkpoint");
  }
  TraceSpan span(trace_, "capture", version, registry_.total_bytes());
  Snapshot snapshot = capture_->take(
      registry_.regions(), version_header(registry_, name, route_.identity(), version, comm->rank(), config.pipeline.chunk_size, metadata),
      *route.front(), times);
  ++checkpoints_;
  newest_version_ = version;
  return snapshot;
}

void Store::Impl::submit(int version, Clock::time_point started, std::vector<Level*> route, Snapshot snapshot) {
  const bool synchronous = snapshot.synchronous;
  const int first_level = route.front()->number();
  scheduler_->submit(version, std::move(route), std::move(snapshot));
  if (synchronous) catalog_.wait(version, first_level);
  const double blocked = seconds_since(started);
  catalog_.set_blocking(version, blocked);
  timer_.checkpointed(blocked);
}

// ------------------------------------------------------------------ queries

void Store::Impl::wait(int version, int level) {
  check_open("wait");
  route_.check_wait(level);
  job_->wait(version, level);
}

int Store::Impl::newest_committed() {
  const std::map<int, std::vector<int>> committed = committed_versions(route_.readable());
  return committed.empty() ? -1 : committed.rbegin()->first;
}

std::vector<VersionStats> Store::Impl::stats() {
  check_open("stats");
  std::vector<VersionStats> list = catalog_.stats();
  job_->add_stats(list);
  return list;
}

// ------------------------------------------------------------------ restart

void Store::Impl::check_version(int version, const char* call) {
  if (version < 0) throw InvalidArgumentError(std::string(call) + ": version " + std::to_string(version) + " is negative");
  if (!catalog_.discarded(version)) return;
  throw NotFoundError(std::string(call) + ": version " + std::to_string(version) + " of store '" + name +
                      "' was discarded (consumed); restart another version, or checkpoint the state again");
}

int Store::Impl::restart(int version, RestartScope scope) {
  check_open("restart");
  if (version != kLatest) check_version(version, "restart");
  const RestartParts parts{identity(), comm->rank(), route_, registry_, *capture_, *prefetcher_, *pool_, log_, trace_};
  Restored restored = job_->restart(version, restart_steps(parts, scope));
  last_restart = std::move(restored.report);
  metadata = std::move(restored.metadata);
  newest_version_ = std::max(newest_committed(), restored.version);  // the next version must be newer
  return restored.version;
}

// -------------------------------------------------- describe and persist

VersionDescription Store::Impl::describe(int version) {
  check_open("describe");
  check_version(version, "describe");
  if (catalog_.known(version)) catalog_.wait_first_level(version);
  return describe_version(route_.readable(), identity(), comm->rank(), version);
}

void Store::Impl::persist(int version, int level) {
  check_open("persist");
  Level& target = route_.persist_target(level);
  check_version(version, "persist");
  if (catalog_.known(version)) catalog_.wait_first_level(version);
  if (!copy_with_bases(route_.readable(), version, target)) {
    throw NotFoundError("persist: store '" + name + "' holds no copy of version " + std::to_string(version) +
                        " to copy to " + target.where());
  }
}

// ---------------------------------------------------------- adjoint staging

void Store::Impl::prefetch(std::vector<int> versions) {
  check_open("prefetch");
  for (int version : versions) check_version(version, "prefetch");
  prefetcher_->set_order(std::move(versions));
}

void Store::Impl::discard(int version) {
  check_open("discard");
  if (version < 0) throw InvalidArgumentError("discard: version " + std::to_string(version) + " is negative");
  if (catalog_.discarded(version)) {
    throw StateError("discard: version " + std::to_string(version) + " of store '" + name + "' was already discarded");
  }
  check_held(route_.readable(), catalog_, name, version, "discard");
  catalog_.discard(version);
  prefetcher_->forget(version);
  route_.memory().remove(version);  // its room is free at once for the next prefetch
  scheduler_->discard(version);
}

bool Store::Impl::need_checkpoint() {
  check_open("need_checkpoint");
  if (config.interval.policy == IntervalPolicy::kNone) {
    throw StateError("need_checkpoint: store '" + name +
                     "' has no checkpoint interval policy; set interval.policy to seconds, overhead or young-daly "
                     "(docs/interval.md)");
  }
  return timer_.due();
}

// ------------------------------------------------------------- public API

Store::Store(const std::string& name, const Config& config, std::shared_ptr<Env> env)
    : impl_(std::make_unique<Impl>(name, config, nullptr, std::move(env))) {}
Store::Store(const std::string& name, const Config& config, std::shared_ptr<Comm> comm, std::shared_ptr<Env> env)
    : impl_(comm ? std::make_unique<Impl>(name, config, std::move(comm), std::move(env))
                 : throw InvalidArgumentError("store '" + name + "': the communicator is null")) {}
namespace {

// In a child forked while the store was open, the Impl's members own
// threads that exist only in the parent (joining them would wait for ever),
// mutexes those threads may have held at the fork, and files and locks the
// parent still uses: none of it can be destroyed safely, so it is leaked,
// on purpose. Its memory is the child's copy and goes with the child.
void leak_if_inherited(std::unique_ptr<Store::Impl>& impl) {
  if (impl && impl->inherited()) static_cast<void>(impl.release());
}

}  // namespace

Store::~Store() { leak_if_inherited(impl_); }
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&& other) noexcept {
  if (this != &other) {
    leak_if_inherited(impl_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

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
