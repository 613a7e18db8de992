// Capture: how the application's bytes are taken at checkpoint() (DESIGN.md,
// "Data flow and modules"). It runs on the application thread and turns the
// protected regions into a Snapshot: where the bytes of each region are for
// the writer, and a hook that gives that memory back once written. A capture
// whose version is written by another process (fork) hands over a waiter
// instead. Implementations: copy into the L1 host buffer (with a synchronous
// path for states larger than the buffer), fork, auto (copy when the state
// fits the buffer, fork otherwise) and delta (copy of the blocks written
// since the previous version, found by a Tracker).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "capture/extent.h"
#include "core/log.h"
#include "core/registry.h"
#include "format/container.h"
#include "resurgo/config.hpp"
#include "tier/level.h"

namespace resurgo {

class ThreadPool;

// What a writer in another process reports once the version is committed.
struct WrittenVersion {
  std::uint64_t stored_bytes = 0;
  std::uint64_t copy_on_write_bytes = 0;  // memory duplicated while it wrote
};

// What the delta capture's Tracker found (zero for the other captures).
struct TrackingFacts {
  std::string tracker;                 // method of the region with the most dirty bytes
  std::uint64_t dirty_bytes = 0;       // bytes in the pages (or blocks) the tracker reported written
  std::uint64_t granularity_bytes = 0; // largest management block in force
};

// Extents covering every region whole, read from the application's memory.
std::vector<Extent> whole_regions(const std::vector<Region>& regions);

struct Snapshot {
  format::Header header;  // base_version >= 0: a delta, whose extents are sparse
  std::vector<Extent> extents;  // ascending (region, offset), disjoint
  TrackingFacts tracking;
  std::function<void()> release;          // gives the memory back once written; may be empty
  // Set when some extents' bytes are not in host memory yet (device regions
  // held in the L0 device cache): the first level's worker calls it before
  // writing, and it sets those extents' sources. Throws what made it fail.
  std::function<void(std::vector<Extent>&)> stage;
  // Set when another process writes the version to the first level itself:
  // waits for it; throws what made it fail.
  std::function<WrittenVersion()> await_writer;
  // The sources are the application's own memory: checkpoint() returns only
  // once the version is written.
  bool synchronous = false;
};

// Where checkpoint()'s blocking time went; the Catalog publishes it.
struct CaptureTimes {
  double backpressure_seconds = 0;  // waiting for buffer space or for the previous child
  double first_touch_seconds = 0;   // faulting in buffer pages the prefault had not reached
  double copy_seconds = 0;          // copying (copy) or forking (fork)
  // Device regions (device_capture.h): their bytes, whether they went into
  // L0, and the part of copy_seconds spent waiting for L0 space (a chunk to
  // be mapped, the oldest version to be flushed).
  std::uint64_t device_bytes = 0;
  bool device_into_l0 = false;
  double device_wait_seconds = 0;
};

// Services a capture may use, owned by the Store.
struct CaptureContext {
  const Config& config;
  ThreadPool& pool;
  const Logger& log;
  // Called with true before the application's memory is copied and false
  // after: evictions never compete with a capture.
  std::function<void(bool)> capturing;
};

class Capture {
 public:
  virtual ~Capture() = default;

  // The mode a checkpoint of `state_bytes` would use: "copy",
  // "synchronous" or "fork" (what the stats report).
  virtual const char* mode(std::uint64_t state_bytes) const = 0;
  // The protected set changed to `state_bytes` in all; called on the
  // application thread between captures.
  virtual void resize(std::uint64_t state_bytes) = 0;
  // Takes `regions` as the version described by `header`. `first_level` is
  // the first level of the version's route (a forked child writes it).
  virtual Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                        CaptureTimes& times) = 0;
  // A restart is about to write into the protected regions (and needs the
  // memory bandwidth): background preparation pauses until `false`.
  virtual void restarting(bool) {}
  // Region `id` is no longer protected; its memory may be freed right after.
  virtual void unprotected(int /*id*/) {}
  // The next version must not depend on earlier ones: it goes to a level
  // that does not hold them, an earlier version failed, or a restart
  // rewrote the regions; `why` says which, for the log. Only the delta
  // capture keeps chains.
  virtual void start_new_chain(const std::string& /*why*/) {}
};

// The capture `config.capture.mode` names.
std::unique_ptr<Capture> make_capture(const CaptureContext& context);

// Default L1 capacity for `state_bytes` of protected state: twice the state
// (one version captured while the previous one is written), bounded by a
// quarter of the node's physical memory.
std::uint64_t default_buffer_capacity(std::uint64_t state_bytes);
// A quarter of the physical memory (0 when unknown): the default bound of
// the memory levels.
std::uint64_t quarter_of_physical_memory();

}  // namespace resurgo
