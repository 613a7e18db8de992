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
#include <utility>

#include "base/names.h"
#include "core/config_checks.h"
#include "core/errors.h"
#include "format/container.h"
#include "format/file_names.h"
#include "job/self_comm.h"
#include "store/device_prefetch.h"
#include "store/restart_steps.h"
#include "store/restore.h"
#include "store/store_impl.h"

namespace resurgo {

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
  scheduler_ = std::make_unique<Scheduler>(route_.scheduled(), config.pipeline, *pool_, catalog_, log_, trace_,
                                           config.delta, [this] { return route_.readable(); });
  capture_ = make_capture(CaptureContext{config, *pool_, log_, [this](bool on) { scheduler_->set_capturing(on); },
                                         route_.device(), &route_.memory()});
  // Made at open, idle until the first prefetch(): the listeners below run
  // on pipeline threads and may not race with its creation.
  prefetcher_ = std::make_unique<Prefetcher>(
      route_.memory(), [this] { return route_.readable_after(kL1); }, log_, trace_,
      device_prefetch({identity(), comm->rank(), route_, registry_, config.device.backend, *pool_, log_, trace_}));
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
  route_.memory().unpin_pieces();  // registered by the device capture, if any
  route_.close();
  closed_ = true;
  if (trace_.enabled()) trace_.write(*env_);
  catalog_.report_failure([] { return std::string("store closed, but "); });
  if (job_failure) std::rethrow_exception(job_failure);
}

// ---------------------------------------------------------------- registry

// A protect that fails leaves nothing registered: the same id and label
// can be protected again once the cause is gone.
// protect, protect_device and protect_managed fail alike (core/errors.h).
void Store::Impl::protect(Region region) {
  for_call("protect", name, [&] {
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
  });
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
  const RestartParts parts{identity(), comm->rank(), route_, registry_, *capture_, *prefetcher_, *scheduler_, *pool_, log_, trace_};
  Restored restored = job_->restart(version, restart_steps(parts, scope));
  last_restart = std::move(restored.report);
  metadata = std::move(restored.metadata);
  // The next version must be newer than every version held. The store knew
  // them all at open and has taken each since, so only a restart of the
  // newest lists the levels again (an adjoint restores a version at nearly
  // every step: a listing of the L2 directory each time, issue 27).
  const int newest_held = version == kLatest ? newest_committed() : newest_version_;
  newest_version_ = std::max(newest_held, restored.version);
  // local.keep and persistent.keep apply at restart too (once: store_impl.h)
  if (!std::exchange(kept_at_restart_, true)) scheduler_->request_eviction();
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

}  // namespace resurgo
