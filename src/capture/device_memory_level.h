// The device regions' use of the L1 memory level (docs/gpu.md, "Pinned
// versions in memory"; issue 30, part 3). The backward pass of an adjoint
// code restores versions the memory level keeps, in reverse order; their
// device regions go host to device, and a copy out of pageable memory runs
// at a fraction of the bandwidth of one out of pinned memory, synchronously.
// So:
// - the level's pieces are pinned through the store's pinner once touched
//   (pin_memory_level, the level's PiecePinner hook: the level knows no
//   driver), and
// - a restart of a version L1 holds copies its device regions straight out
//   of the level's pieces (InPlaceDeviceCopy), span by span within one piece
//   (each its own registration), queued on the device and waited for once,
//   instead of reading them into pageable host copies first.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "core/registry.h"
#include "gpu/device_access.h"
#include "gpu/host_pinner.h"
#include "tier/memory_level.h"

namespace resurgo {

// From now on `level` pins the pieces of the versions committed to it with
// `pinner` (one pin per 2 MiB piece, far below any pinner's max_piece()).
// The first failure is logged as a warning; the level then pins no more and
// restores copy from its pageable pieces. The pinner lives as long as the
// level: it unpins the pieces when the level is destroyed.
void pin_memory_level(MemoryLevel& level, std::shared_ptr<gpu::HostPinner> pinner, const Logger& log);

// The device and managed regions of one version, copied from where L1 holds
// it. Every chunk to be copied is verified (its record and its checksum,
// computed in the pieces) before open() returns, so that write_back() only
// copies: the pieces of a committed version never change while the reader
// holds them, and a damaged copy is left to the restore, which reads the
// version from another level and reports the damage.
class InPlaceDeviceCopy {
 public:
  // Null when L1 cannot give the device regions of `regions` (the registry's)
  // for `version` as they lie: L1 does not hold it, its region table lacks a
  // device region or sizes it otherwise (the restore then says so), a
  // region's chunks are compressed or do not cover it (a delta), or a chunk
  // fails its checks.
  static std::unique_ptr<InPlaceDeviceCopy> open(MemoryLevel& level, int version, const std::vector<Region>& regions);

  // Queues the host-to-device copies of every chunk, cut at piece bounds,
  // then waits for them; the regions hold the version on return. Throws
  // GpuError naming the version, the region and the driver call (once the
  // copies already queued ended). Returns the bytes copied.
  std::uint64_t write_back(gpu::DeviceAccess& access) const;

 private:
  struct Copy {
    std::string label;  // of the region
    std::byte* device;
    std::uint64_t file_offset;
    std::uint64_t bytes;
  };
  InPlaceDeviceCopy(int version, std::unique_ptr<MemoryLevel::Reader> reader, std::vector<Copy> copies)
      : version_(version), reader_(std::move(reader)), copies_(std::move(copies)) {}

  int version_;
  std::unique_ptr<MemoryLevel::Reader> reader_;  // holds the version's pieces
  std::vector<Copy> copies_;
};

}  // namespace resurgo
