// Snapshot: what a Capture hands the Scheduler for one version (DESIGN.md,
// "Data flow and modules"): the header, where each region's bytes are for
// the writer, and the hooks that stage, release or wait for them; and the
// facts the capture reports with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/container.h"
#include "format/extent.h"

namespace resurgo {

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
  // once the version is written (Scheduler::submit writes it on the
  // caller's thread when the first level's worker is idle).
  bool synchronous = false;
  // Set with `synchronous` by a copy capture whose version is small and goes
  // to the memory level first: its one copy is the write into that level.
  bool into_memory_level = false;
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

}  // namespace resurgo
