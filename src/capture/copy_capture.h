// Copy capture: checkpoint() copies the protected bytes into a block of the
// host staging buffer and returns; the pipeline writes the block and releases it.
// A state larger than the buffer is captured synchronously: the writer reads
// the application's memory and checkpoint() waits until the version is written.
#pragma once

#include <memory>

#include "capture/capture.h"
#include "capture/host_buffer.h"

namespace resurgo {

// Versions up to this size whose first level is the memory level are written
// straight into it (take()), on the application's thread alone
// (ThreadPool::kCallerOnlyBytes). 1 MiB until versions of 2 and 4 MiB
// were measured that way against the staging buffer and a second copy in
// the background (bench/results/memory_one_copy.md, C++, 4 MiB: back to
// back 332 -> 187 us, none waiting for the buffer where 25 of 512 did, a
// restore 139 -> 107 us; with a 0.5 ms step 187 -> 213 us, the one-pass
// copy and checksum costing more than a memcpy into the warm buffer), and
// the adjoint at 4 MiB (adjoint_memory_one_copy.md: wall / NumpyStorage
// 1.53 -> 1.29 through ResurgoStorage, 1.08 -> 1.14 through
// ResurgoRevolver, within that row's spread). Larger versions are not
// measured this way here: into memory not touched lately, the one-pass
// copy and checksum reads every line it stores, where the buffer's memcpy
// does not.
inline constexpr std::uint64_t kStraightToMemoryBytes = std::uint64_t{4} << 20;

class CopyCapture final : public Capture {
 public:
  explicit CopyCapture(const CaptureContext& context) : context_(context) {}

  const char* mode(std::uint64_t state_bytes) const override;
  void resize(std::uint64_t state_bytes) override;
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;
  void restarting(bool restarting) override;

  // Whether `state_bytes` fits the buffer (else the capture is synchronous).
  bool fits(std::uint64_t state_bytes) const;

  // Copies `extents` (read from the application's memory) into one block of
  // the buffer, one after the other; the snapshot's extents point there.
  // Extents larger than the buffer are written synchronously from where they are.
  Snapshot capture(std::vector<Extent> extents, format::Header header, CaptureTimes& times);

 private:
  std::uint64_t wanted_capacity(std::uint64_t state_bytes) const;
  // Makes the buffer when there is none or it is smaller than `state_bytes` wants.
  void grow(std::uint64_t state_bytes);
  void copy(std::vector<Extent>& extents, std::byte* block, CaptureTimes& times);

  CaptureContext context_;
  std::shared_ptr<HostBuffer> buffer_;
  bool warned_synchronous_ = false;
  // wanted_capacity's last answer, for a state of sized_for_ bytes. Only the
  // application's thread (checkpoint, protect) asks.
  mutable std::uint64_t sized_for_ = ~std::uint64_t{0};
  mutable std::uint64_t wanted_ = 0;
};

}  // namespace resurgo
