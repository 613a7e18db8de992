// HostPinner through the CUDA driver: cuMemHostRegister with
// CU_MEMHOSTREGISTER_PORTABLE (the pages count as pinned in every context of
// the process, not only the one current here), cuMemHostUnregister.
//
// Pieces of at most 1 GiB: one registration has a per-call ceiling (on r580+
// drivers a call of 512 GiB or more fails with CUDA_ERROR_OUT_OF_MEMORY
// whatever memory is free, vllm-project/vllm#51080), and shorter calls let a
// buffer stop pinning between pieces when it is destroyed. A registration
// also stalls the device's copies while it runs (paper, section IV-A), so
// shorter calls spread the stall.
#pragma once

#include <cuda.h>

#include "gpu/cuda_driver.h"
#include "gpu/host_pinner.h"

namespace resurgo::gpu {

class CudaHostPinner : public HostPinner {
 public:
  static constexpr std::size_t kMaxPiece = std::size_t{1} << 30;

  // Retains the primary context of `device`, made current on whichever
  // thread pins. Throws GpuError when the driver is unavailable or the
  // device cannot be opened.
  explicit CudaHostPinner(int device = 0, const CudaDriver& driver = CudaDriver::instance());
  ~CudaHostPinner() override;
  CudaHostPinner(const CudaHostPinner&) = delete;
  CudaHostPinner& operator=(const CudaHostPinner&) = delete;

  std::string name() const override { return "cuMemHostRegister"; }
  std::size_t max_piece() const override { return kMaxPiece; }
  void pin(void* data, std::size_t bytes) override;
  void unpin(void* data, std::size_t bytes) noexcept override;

 private:
  const CudaDriver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

}  // namespace resurgo::gpu
