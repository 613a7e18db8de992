// HostPinner through the CUDA driver: cuMemHostRegister with
// CU_MEMHOSTREGISTER_PORTABLE (the pages count as pinned in every context of
// the process, not only the store device's), cuMemHostUnregister; each call
// inside a CudaContext::Scope of the store's device.
//
// Pieces of at most 1 GiB: one registration has a per-call ceiling (on r580+
// drivers a call of 512 GiB or more fails with CUDA_ERROR_OUT_OF_MEMORY
// whatever memory is free, vllm-project/vllm#51080), and shorter calls let a
// buffer stop pinning between pieces when it is destroyed. A registration
// also stalls the device's copies while it runs (paper, section IV-A), so
// shorter calls spread the stall. A copy must not span a piece boundary
// (late_pin_buffer.h says why).
#pragma once

#include <cuda.h>

#include "gpu/cuda_context.h"
#include "gpu/host_pinner.h"

namespace resurgo::gpu {

class CudaHostPinner : public HostPinner {
 public:
  static constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

  // Throws GpuError when the driver is unavailable or device `ordinal`
  // cannot be opened. `max_piece`: smaller pieces for tests.
  explicit CudaHostPinner(int ordinal = 0, const CudaDriver& driver = CudaDriver::instance(),
                          std::size_t max_piece = kMaxPiece);

  std::string name() const override { return "cuMemHostRegister"; }
  std::size_t max_piece() const override { return max_piece_; }
  void pin(void* data, std::size_t bytes) override;
  void unpin(void* data, std::size_t bytes) noexcept override;

 private:
  const CudaDriver& driver_;
  CudaContext context_;
  const std::size_t max_piece_;
};

}  // namespace resurgo::gpu
