// Prefetcher: adjoint staging (DESIGN.md). The backward pass of an adjoint
// restores the forward states in reverse order; Store::prefetch names that
// order, and this thread copies the next versions from the slower levels
// into the L1 memory level, in that order, as room allows: room that
// Store::discard frees as versions are consumed, or that dropping a
// prefetched copy needed later than the next version makes (the order is
// the future, so the replacement is Belady's optimal one). It looks no
// further ahead in the order than the memory level holds versions. A
// restart of a prefetched version then reads memory instead of a file.
// Copies verify every chunk; a failed prefetch is reported by the restart
// that needed it, which reads the version from the slower level instead.
//
// A store with an L0 device cache gives it a DeviceStage too: once a version
// is in memory (or on its level, when memory cannot hold it), the thread
// stages its device regions into L0, in the same order, so that its restart
// is a device-to-device copy (docs/adjoint.md, "Backward pass on the
// device"). A version that does not fit L0 is restored from host memory; a
// failed stage is reported like a failed prefetch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/trace.h"
#include "capture/capture.h"
#include "core/registry.h"
#include "tier/level.h"
#include "tier/memory_level.h"

namespace resurgo {

// The device side of a prefetch (store/device_prefetch.h implements it).
class DeviceStage {
 public:
  enum class Outcome {
    kDone,    // staged, or nothing to stage (no device regions, in L0 already, too large)
    kNoRoom,  // L0 is full of versions still needed: try again when one is restored or discarded
  };
  virtual ~DeviceStage() = default;
  // Application thread, at each prefetch(): the device regions to stage are
  // those protected now.
  virtual void take_regions() = 0;
  // Prefetch thread: stages `version`. Throws Error when it fails.
  virtual Outcome stage(int version) = 0;
  // The version was restored for the last time, or discarded: its L0 space
  // may go (at once for a discard).
  virtual void restored(int version) = 0;
  virtual void discarded(int version) = 0;
  // Application thread: the targets of a restart of `version` that copy its
  // device regions from L0; null when it is not staged there for `registry`.
  virtual std::unique_ptr<RestartTargets> restart_targets(const Registry& registry, int version) = 0;
};

class Prefetcher {
 public:
  // `sources()`: the levels to copy from, fastest first (asked at each look,
  // as levels appear); `device`: the L0 stage, null without L0. The thread
  // starts with the first order.
  Prefetcher(MemoryLevel& memory, std::function<std::vector<Level*>()> sources, const Logger& log, Trace& trace,
             std::unique_ptr<DeviceStage> device = nullptr);
  ~Prefetcher();  // a copy in flight finishes first
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The restores to come, in order (a version restored twice appears
  // twice); replaces the previous order. Versions not written yet are
  // fetched once written.
  void set_order(std::vector<int> versions);
  // `version` was restored: its first use in the order is done.
  void restored(int version);
  // The version was discarded: never fetch it again (a copy in flight is
  // dropped when it lands).
  void forget(int version);
  // Something changed (a version was committed, memory was freed): look again.
  void poke();
  // Waits while `version` is being copied; returns why its prefetch failed,
  // if it did (reported once).
  std::optional<std::string> settle(int version);
  // The targets of a restart of `version` straight from L0, when it was
  // staged there; null otherwise (after settle()).
  std::unique_ptr<RestartTargets> restart_targets(const Registry& registry, int version);
  // The passes over the order made so far (a test's view of the wake-ups).
  std::uint64_t passes();

 private:
  void run();
  // One pass over the order: copies what is due, until a version that
  // waits for room. True when it left a version for a poke (one not written
  // yet, or waiting for room).
  bool fetch_due();
  Level* source_of(int version);
  // Frees `bytes` of memory, dropping prefetched copies needed after the
  // restore at `position`; false when that is not enough.
  bool make_room(const std::vector<int>& order, std::size_t position, std::uint64_t bytes);
  // The prefetched copy in memory whose next use comes last, after `position`.
  std::optional<int> needed_last(const std::vector<int>& order, std::size_t position);
  // Brings `version` into memory from `source`; false when it waits for room.
  bool into_memory(const std::vector<int>& order, std::size_t position, int version, Level& source);
  // Copies one version; false when it did not fit after all (memory taken meanwhile).
  bool fetch(int version, Level& source, std::uint64_t bytes);
  // Stages `version` into L0; false when it waits for room there.
  bool onto_device(int version);
  // Records why the prefetch of `version` failed, for settle(). Caller holds mutex_.
  void failed(int version, const std::string& why);
  // Whether an event (a commit, a restore, a discard) calls for a pass;
  // sets look_again_ if so. Caller holds mutex_.
  bool needs_a_pass();

  MemoryLevel& memory_;
  std::function<std::vector<Level*>()> sources_;
  const Logger& log_;
  Trace& trace_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> order_;
  std::set<int> forgotten_;
  std::set<int> given_up_;    // failed or too large: restart reads them from their level
  std::set<int> prefetched_;  // copied into memory by this thread (their level holds them too)
  std::map<int, std::string> failures_;
  int in_flight_ = -1;
  bool look_again_ = false;
  bool passing_ = false;         // fetch_due() runs: a poke must make it look again
  bool waits_for_poke_ = false;  // the last pass left a version for a poke
  std::uint64_t passes_ = 0;
  std::uint64_t version_bytes_ = 0;  // prefetch thread: the memory the last version looked up takes
  bool stopping_ = false;
  std::unique_ptr<DeviceStage> device_;
  std::set<int> device_done_;  // staged, or given up, since the last order
  std::thread thread_;
};

}  // namespace resurgo
