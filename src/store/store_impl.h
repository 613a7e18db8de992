// Store::Impl: the state of an open store and the conductor's steps
// (store.cpp); the public calls (store_calls.cpp) forward to it.
#pragma once

#include <optional>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "base/trace.h"
#include "capture/capture.h"
#include "core/catalog.h"
#include "core/checkpoint_timer.h"
#include "core/registry.h"
#include "job/job.h"
#include "pipeline/prefetcher.h"
#include "pipeline/scheduler.h"
#include "resurgo/resurgo.hpp"
#include "base/owner_process.h"
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
  void set_capture_streams(std::vector<void*> streams) {
    check_open("set_capture_streams");
    capture_->set_capture_streams(std::move(streams));
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
  // The levels' keep is applied at the first restart (to what earlier runs
  // left), not at every one: waking the eviction thread cost each restart a
  // thread hand-off (issue 27). A copy a later restart brings back to a
  // level (from L4 to L2) is trimmed at the next checkpoint or at close.
  bool kept_at_restart_ = false;
  bool closed_ = false;
};

}  // namespace resurgo
