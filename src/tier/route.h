// Route: a store's levels in order, from its configuration (DESIGN.md,
// "Route"), each a Level:
//   L0  the device cache (docs/gpu.md): device.capacity > 0 and a usable
//       backend; the device capture fills it, at every version with device
//       regions
//   L1  the memory level: memory.every, memory.keep, memory.capacity
//   L2  the node-local directory: local.every, local.keep
//   L3  partner copies on other nodes: an MPI store's job adds it (add_partner)
//   L4  the persistent directory: persistent.every, persistent.keep
// It prepares a directory level lazily: one that exists at open is locked
// then; a missing one is made (and locked) when the first version goes
// there, so that a store that never wrote leaves no directory behind and
// a read-only working directory does not stop a store whose versions go to
// L2 (reading never makes a directory). L3 lives inside L2's directory: a
// store with partner.scheme makes L2 at open. The route says which levels
// a checkpoint goes to, which ones restore reads, and whether
// wait(version, level) and persist(version, level) name a level they can.
//
// Thread safety: readable() may be called from any thread (the prefetcher's);
// the rest from the store's calls.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "format/store_id.h"
#include "resurgo/config.hpp"
#include "resurgo/env.hpp"
#include "tier/device_level.h"
#include "tier/directory_level.h"
#include "tier/memory_level.h"

namespace resurgo {

class Route {
 public:
  // A level the scheduler moves versions to: the n-th checkpoints go there
  // when n is a multiple of `every` (0: none).
  struct Step {
    Level* level;
    int every;
  };

  // `node`: this rank's node, for "{node}" in local.path (docs/mpi.md).
  // Prepares and locks the directory levels whose directory exists, and
  // claims the others for this rank in this process (StateError when
  // another process or Store holds the lock or the claim); checks the path
  // of the levels that take checkpoints (StorageError for a file in the
  // way); opens L0 when configured (on the device of the calling thread's
  // current context), or logs why it cannot. Throws ConfigError when no
  // level takes checkpoints.
  Route(const std::string& store, int rank, int node, const Config& config, std::shared_ptr<Env> env,
        const Logger& log);

  // The levels the `checkpoint_number`-th checkpoint (counting from 1) goes
  // to, fastest first, each prepared: a directory level is made now when
  // this is its first version. One that cannot be made refuses the
  // version's write, saying which key to change: the version fails in the
  // background, as a failed write would.
  std::vector<Level*> levels_for(long checkpoint_number);
  // L1, L2, L4 with their `every`: what the scheduler's workers serve.
  std::vector<Step> scheduled() const;
  // The levels a restore reads and listings look in: L1, and L2 and L4 once
  // prepared (before, they hold nothing of this store's: a directory made
  // since by another process is not read). L0 holds device images, L3
  // other ranks' copies.
  std::vector<Level*> readable() const;
  // Those of them slower than level `number` (the prefetcher's sources).
  std::vector<Level*> readable_after(int number) const;
  // The level numbered `number`, or null when the store has none.
  Level* level(int number) const;
  // The directory levels that may hold versions: L2 and L4 once prepared.
  std::vector<DirectoryLevel*> directories() const;
  // `level` as a directory level, or null when it is another kind.
  DirectoryLevel* directory(const Level* level) const;
  // Whether `level` takes every checkpoint (a delta's base is surely there).
  bool takes_every_checkpoint(const Level& level) const;
  // The n-th checkpoints `level` takes ("local.every = 3"), for messages.
  std::string every_text(int number) const;

  // InvalidArgumentError when wait() cannot wait for `number` on this store:
  // no such level, or one that takes no checkpoint; says which key to set.
  void check_wait(int number) const;
  // The directory level persist() copies to, prepared; InvalidArgumentError
  // for another number.
  Level& persist_target(int number);

  MemoryLevel& memory() { return memory_; }
  DirectoryLevel& local() { return local_; }
  DirectoryLevel& persistent() { return persistent_; }
  // L0, or null without one.
  DeviceLevel* device() const { return device_.get(); }
  // The store's close(), once every version settled: removes the versions
  // beyond `keep` from the directory levels that take checkpoints (those
  // of earlier runs too; a failure is logged), gives L0's device memory
  // back, and the locks and claims.
  void close();
  // The store identities the existing directories of L2 and L4 hold, each
  // with its directory.
  std::vector<std::pair<format::StoreId, std::string>> identities_found();
  // The store's identity from now on (called at open), written into each
  // directory level that holds none, now or once prepared; MismatchError
  // naming the directory that holds another (it belongs to another store).
  // A `drawn` identity (none was found) gives way to the one a process of
  // the same store opening at the same moment wrote first into any of its
  // directories, as long as no version carries it: at the latest, until
  // the first checkpoint's levels are prepared. Two ranks that find none
  // and write theirs into L2 and L4 at the same instant still differ; the
  // version then fails at the directory that holds the other's.
  void set_identity(const format::StoreId& id, bool drawn);
  const format::StoreId& identity() const { return identity_; }

  // An MPI store's job adds its L3 (owned by the job, which outlives nothing
  // of the route's use of it: the store closes the job last).
  void add_partner(Level& partner) { partner_ = &partner; }

 private:
  // What the route holds of a directory level.
  struct Held {
    std::unique_ptr<FileLock> claim;  // from open, when missing then (store_claim.h)
    std::unique_ptr<FileLock> lock;   // the lock file's, once prepared
    std::atomic<bool> prepared{false};  // read by the prefetcher's thread
    std::atomic<bool> identity_waits{false};  // for L2 to settle a drawn identity (set_identity)
  };

  int every_of(const Level& level) const;
  Held& held(const DirectoryLevel& level);
  // Makes (when missing), cleans and locks `level`, and writes the identity.
  void prepare(DirectoryLevel& level);
  void prepare_for_version(DirectoryLevel& level);
  void adopt_identity(DirectoryLevel& level);
  std::optional<format::StoreId> identity_written_elsewhere(const DirectoryLevel& level);
  void evict_surplus();

  std::string store_;
  const Config& config_;
  const Logger& log_;
  MemoryLevel memory_;
  DirectoryLevel local_;
  DirectoryLevel persistent_;
  std::unique_ptr<DeviceLevel> device_;
  Level* partner_ = nullptr;
  std::mutex prepare_mutex_;
  Held local_held_;
  Held persistent_held_;
  format::StoreId identity_;  // unknown until set_identity
  bool identity_drawn_ = false;  // and no version carries it yet
};

}  // namespace resurgo
