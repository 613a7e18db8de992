// DeviceAccess through the CUDA driver: synchronous copies in the primary
// context of the store's device, pushed and popped around each call, and a
// pointer's kind and device from cuPointerGetAttribute.
#pragma once

#include <cuda.h>

#include "gpu/cuda_context.h"
#include "gpu/device_access.h"

namespace resurgo::gpu {

class CudaDeviceAccess final : public DeviceAccess {
 public:
  // Throws GpuError when the driver is unavailable or device `ordinal`
  // cannot be opened.
  explicit CudaDeviceAccess(int ordinal = 0, const CudaDriver& driver = CudaDriver::instance());

  std::string name() const override { return "cuda (" + context_.name() + ")"; }
  int device() const override { return context_.ordinal(); }
  // cuDeviceGetCount; 0 when it fails.
  int device_count() const override;
  std::optional<PointerInfo> describe(const void* pointer) const override;
  // cuCtxSynchronize in the store's device's primary context, the one the
  // CUDA runtime gives the application.
  void synchronize(const std::vector<void*>& streams) override;
  void to_host(void* host, const void* device, std::size_t bytes) override;
  // cuMemcpyHtoD from pageable memory returns once the bytes are staged, not
  // once they reached the device: the null stream is synchronised too.
  void to_device(void* device, const void* host, std::size_t bytes) override;
  // cuMemcpyHtoDAsync on the legacy null stream (ordered with the
  // application's work on blocking streams, as to_device's copies are);
  // wait_to_device synchronises that stream. Asynchronous only from pinned
  // memory: from pageable memory the driver stages the bytes first.
  void to_device_async(void* device, const void* host, std::size_t bytes) override;
  void wait_to_device() override;
  // CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION of the range
  // (cuMemRangeGetAttribute); unknown when the driver refuses the query.
  int residence(const void* managed, std::size_t bytes) const override;
  // cuMemPrefetchAsync on the legacy null stream of the store's device's
  // context, which orders it before the application's work on blocking
  // streams; not waited for. The destination may be another device.
  void prefetch_to_device(void* managed, std::size_t bytes, int ordinal) override;

  // Pageable host memory is unknown to the driver: kHost. On a thread with
  // no current context (a driver may want one for the query) it asks under
  // a primary context that is active already, pushed and popped, and never
  // creates one: a process whose primary contexts are all inactive holds no
  // memory from them.
  static PointerInfo describe(const CudaDriver& driver, const void* pointer);
  // The ordinal of the calling thread's current context's device, or none.
  static std::optional<int> current_device(const CudaDriver& driver);

 private:
  const CudaDriver& driver_;
  CudaContext context_;
};

}  // namespace resurgo::gpu
