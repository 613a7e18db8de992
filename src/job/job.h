// Job: what checkpoint, wait, latest, restart and close mean for the job a
// store belongs to (DESIGN.md, "Job"). A process alone (SoloJob) decides
// each version by itself; the ranks of an MPI job (CollectiveJob) commit
// each version in two phases, protect it on L3 with partner or XOR copies,
// and restart from the newest version every rank holds, also one written
// by another number of ranks. The Store calls the job and is never called
// back: what a restart writes into the protected regions it hands over as
// functions (RestoreSteps). Nothing here calls MPI: the communicator is a
// Comm (src/mpi/ binds it to MPI).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "core/catalog.h"
#include "core/registry.h"
#include "format/manifest.h"
#include "pipeline/scheduler.h"
#include "resurgo/comm.hpp"
#include "resurgo/config.hpp"
#include "resurgo/env.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/route.h"

namespace resurgo {

// What the job may use; the Store owns them all, and the job outlives none.
struct JobContext {
  const std::string& store;
  const Config& config;
  Comm& comm;
  int node;  // this rank's
  Route& route;
  Catalog& catalog;
  Scheduler& scheduler;
  const Registry& registry;
  const Logger& log;
  std::shared_ptr<Env> env;
};

// A version read back into the protected regions.
struct Restored {
  int version = -1;
  RestartReport report;
  std::vector<std::byte> metadata;
};

// How a restart reads a version into the protected regions (the Store's).
struct RestoreSteps {
  // Fills the regions `targets` holds (device regions through host copies);
  // the Store moves what it filled into place once it returned.
  using Filler = std::function<Restored(const Registry& targets)>;
  // From this rank's levels: `version`, or kLatest for the newest intact one.
  std::function<Restored(int version)> from_levels;
  // `version` from the capture's buffer while its first level still writes
  // it (Scheduler::read_in_flight); none when it is not there.
  std::function<std::optional<Restored>(int version)> from_buffer;
  // From anywhere else, `fill` writing the regions.
  std::function<Restored(const Filler& fill)> into_regions;
};

class Job {
 public:
  virtual ~Job() = default;

  // checkpoint(version): before its capture (throws what failed for the job
  // meanwhile), when it failed before being handed over, and once captured
  // (`route`: the levels the version goes to).
  virtual void before_checkpoint(int version) = 0;
  virtual void checkpoint_failed(int version) = 0;
  virtual void checkpointed(int version, Clock::time_point started, const std::vector<Level*>& route) = 0;
  // wait(version, level): `level` is one the route has (Route::check_wait).
  virtual void wait(int version, int level) = 0;
  // The version restart(kLatest) would restore as far as headers, indexes
  // and job manifests tell (job/restorable.h), not discarded; none when the
  // job holds no version; throws when it holds versions but could restore
  // none of them (Store::latest).
  virtual std::optional<int> latest() = 0;
  // restart(version): kLatest, or a version not discarded; the regions are
  // protected. CollectiveJob's kLatest then sets aside the newer versions.
  virtual Restored restart(int version, const RestoreSteps& steps) = 0;
  // Adds what the job's own levels report (L3) to `stats`.
  virtual void add_stats(std::vector<VersionStats>& stats) = 0;
  // Every version decided; throws what failed for the job.
  virtual void close() = 0;
};

// The rank's node: faked by mpi.ranks_per_node (docs/mpi.md), else the
// communicator's.
int node_of(const Config& config, const Comm& comm);

// The job of a store opened without a communicator (`collective` false), or
// with one (MPI stores: docs/mpi.md).
std::unique_ptr<Job> make_job(const JobContext& context, bool collective);

}  // namespace resurgo
