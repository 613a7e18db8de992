// DeviceAccess through the CUDA driver: synchronous copies in the primary
// context of device 0 (the device the L0 cache uses), and the pointer's kind
// from cuPointerGetAttribute.
#pragma once

#include <cuda.h>

#include "gpu/cuda_driver.h"
#include "gpu/device_access.h"

namespace resurgo::gpu {

class CudaDeviceAccess final : public DeviceAccess {
 public:
  // Throws GpuError when the driver is unavailable or device 0 cannot be opened.
  explicit CudaDeviceAccess(const CudaDriver& driver = CudaDriver::instance());
  ~CudaDeviceAccess() override;
  CudaDeviceAccess(const CudaDeviceAccess&) = delete;
  CudaDeviceAccess& operator=(const CudaDeviceAccess&) = delete;

  std::string name() const override { return "cuda"; }
  std::optional<MemoryKind> kind_of(const void* pointer) const override;
  void to_host(void* host, const void* device, std::size_t bytes) override;
  void to_device(void* device, const void* host, std::size_t bytes) override;

  // Pageable host memory is unknown to the driver: kHost. On a thread with
  // no current context (a driver may want one for the query) it asks under
  // device 0's primary context, pushed and popped, so the thread's contexts
  // are left as they were.
  static MemoryKind kind(const CudaDriver& driver, const void* pointer);

 private:
  void make_current() const;

  const CudaDriver& driver_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

}  // namespace resurgo::gpu
