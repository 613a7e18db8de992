// Fork capture (the CRUM paper's forked checkpointing): checkpoint() forks;
// the child writes the version from its copy-on-write image of the
// application's memory to the first level of the version's route and exits,
// while the parent returns as soon as fork() does. One child is in flight per
// store: the next checkpoint waits for it (counted as backpressure).
//
// The child runs in a copy of a multi-threaded process: only the thread that
// forked exists there. It takes no lock another thread may hold (no logging,
// no tracing, no store mutex; glibc's malloc is made safe by its own fork
// handlers), never touches CUDA, and reports to the parent through a pipe.
//
// Once a child has exited, the huge pages its copy-on-write split in the
// parent are collapsed again in the background (capture/huge_page_collapse.h):
// a later fork then costs what the first did, if the collapse ended before it.
//
// Device and managed regions are drained into host memory before the fork
// (capture/device_regions.h, drain_then_fork): the child writes them from
// there through fork_writer.
//
// capture.mode = "auto" may copy some regions into the staging buffer first
// (capture/auto_capture.h): the child then writes those from the buffer, and
// their memory is left out of it (fork_writer), so that the parent writes
// them without copy-on-write faults.
#pragma once

#include <sys/types.h>

#include <memory>

#include "capture/capture.h"
#include "capture/huge_page_collapse.h"

namespace resurgo {

class ForkCapture final : public Capture {
 public:
  explicit ForkCapture(const CaptureContext& context) : context_(context), collapser_(context.log) {}
  ~ForkCapture() override;

  const char* mode(std::uint64_t) const override { return "fork"; }
  void resize(std::uint64_t) override;
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;

  // The system call that forks, replaceable so tests can make it fail
  // (ENOMEM, EAGAIN) or reach the child's error paths. nullptr restores fork().
  using ForkFunction = pid_t (*)();
  static void set_fork_function_for_testing(ForkFunction function);

  // Waits until the previous child was reaped (counted as backpressure).
  void wait_for_previous_child(CaptureTimes& times);
  // Forks the writer of `snapshot`, whose extents read the memory of
  // `regions` except for the regions marked in `copied` (indexes as in
  // `regions`; empty: none), whose bytes were copied elsewhere beforehand.
  // The pages wholly inside a copied region are left out of the child
  // (MADV_DONTFORK during the fork alone): no extent may read them there.
  Snapshot fork_writer(const std::vector<Region>& regions, const std::vector<bool>& copied, Snapshot snapshot,
                       Level& first_level, CaptureTimes& times);

 private:
  struct Child;
  // What check_regions last looked at: a region and whether it was copied.
  struct Checked {
    std::byte* data;
    std::uint64_t bytes;
    bool copied;
    bool operator==(const Checked&) const = default;
  };

  void check_regions(const std::vector<Region>& regions, const std::vector<bool>& copied);
  std::vector<ByteRange> withheld_ranges(const std::vector<Region>& regions, const std::vector<bool>& copied) const;

  CaptureContext context_;
  HugePageCollapser collapser_;
  std::shared_ptr<Child> in_flight_;
  std::vector<Checked> checked_;  // empty: look again
  std::vector<void*> advised_dontfork_;  // copied regions the application keeps from any child
};

}  // namespace resurgo
