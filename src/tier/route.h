// Route: a store's levels in order, from its configuration (DESIGN.md,
// "Route"), each a Level:
//   L0  the device cache (docs/gpu.md): device.capacity > 0 and a usable
//       backend; the device capture fills it, at every version with device
//       regions
//   L1  the memory level: memory.every, memory.keep, memory.capacity
//   L2  the node-local directory: local.every, local.keep
//   L3  partner copies on other nodes: an MPI store's job adds it (add_partner)
//   L4  the persistent directory: persistent.every, persistent.keep
// It prepares a level lazily (L4 only once a version goes there or it holds
// versions: a store with L4 off leaves no ./checkpoints behind), says which
// levels a checkpoint goes to, which ones restore reads, and whether
// wait(version, level) and persist(version, level) name a level they can.
//
// Thread safety: readable() may be called from any thread (the prefetcher's);
// the rest from the store's calls.
#pragma once

#include <atomic>
#include <memory>
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
  // Prepares and locks L2, and L4 when it is routed to or holds versions
  // (StateError when another process or Store holds a lock); opens L0
  // when configured (on the device of the calling thread's current
  // context), or logs why it cannot. Throws ConfigError when no level
  // takes checkpoints.
  Route(const std::string& store, int rank, int node, const Config& config, std::shared_ptr<Env> env,
        const Logger& log);

  // The levels the `checkpoint_number`-th checkpoint (counting from 1) goes
  // to, fastest first, each prepared.
  std::vector<Level*> levels_for(long checkpoint_number);
  // L1, L2, L4 with their `every`: what the scheduler's workers serve.
  std::vector<Step> scheduled() const;
  // The levels a restore reads and listings look in: L1, L2, and L4 once
  // prepared (L0 holds device images, L3 other ranks' copies).
  std::vector<Level*> readable() const;
  // Those of them slower than level `number` (the prefetcher's sources).
  std::vector<Level*> readable_after(int number) const;
  // The level numbered `number`, or null when the store has none.
  Level* level(int number) const;
  // The directory levels that may hold versions: L2, and L4 once prepared.
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
  // The store's close(): gives L0's device memory back and the locks.
  void close();
  // The store identities L2 and L4 hold (L4 read even before it is
  // prepared), each with its directory.
  std::vector<std::pair<format::StoreId, std::string>> identities_found();
  // The store's identity from now on, written into L2, and into L4 now or
  // once prepared, where they hold none; MismatchError naming the directory
  // that holds another (it belongs to another store). A `drawn` identity
  // (none was found) gives way to the one a process of the same store
  // opening at the same moment wrote first: L4, shared by every rank, is
  // written first and decides.
  void set_identity(const format::StoreId& id, bool drawn);
  const format::StoreId& identity() const { return identity_; }

  // An MPI store's job adds its L3 (owned by the job, which outlives nothing
  // of the route's use of it: the store closes the job last).
  void add_partner(Level& partner) { partner_ = &partner; }

 private:
  int every_of(const Level& level) const;
  void prepare_persistent();
  void adopt_identity(DirectoryLevel& level);

  std::string store_;
  const Config& config_;
  MemoryLevel memory_;
  DirectoryLevel local_;
  DirectoryLevel persistent_;
  std::unique_ptr<DeviceLevel> device_;
  Level* partner_ = nullptr;
  std::atomic<bool> persistent_prepared_{false};  // read by the prefetcher's thread
  std::unique_ptr<FileLock> local_lock_;
  std::unique_ptr<FileLock> persistent_lock_;
  format::StoreId identity_;  // unknown until set_identity
};

}  // namespace resurgo
