// DeviceMemory over CUDA virtual memory management: the whole range reserved
// with cuMemAddressReserve, each chunk a cuMemCreate allocation on the
// store's device mapped with cuMemMap and made accessible to that device with
// cuMemSetAccess; copies on two streams of the device's primary context
// (captures on one, reads on the other), from and to device or host memory.
// Every driver call runs inside a CudaContext::Scope: the calling thread's
// own context is left as it was.
#pragma once

#include <cuda.h>

#include <vector>

#include "gpu/cuda_context.h"
#include "gpu/device_memory.h"

namespace resurgo::gpu {

class CudaVmmMemory : public DeviceMemory {
 public:
  // Throws GpuError when the driver is unavailable or device `ordinal`
  // cannot be opened.
  explicit CudaVmmMemory(int ordinal = 0, const CudaDriver& driver = CudaDriver::instance());
  ~CudaVmmMemory() override;
  CudaVmmMemory(const CudaVmmMemory&) = delete;
  CudaVmmMemory& operator=(const CudaVmmMemory&) = delete;

  std::string name() const override { return name_; }
  int device() const override { return context_.ordinal(); }
  std::size_t granularity() const override { return granularity_; }
  void reserve(std::size_t bytes) override;
  MapResult map(std::size_t offset, std::size_t bytes) override;
  void copy_in(std::size_t offset, const void* source, std::size_t bytes) override;
  void wait_copies_in() override;
  void copy_out(std::size_t offset, void* target, std::size_t bytes) override;

  CUdeviceptr base() const { return base_; }

 private:
  CUmemAllocationProp chunk_properties() const;
  bool on_device(CUdeviceptr address) const;  // in the calling scope's context
  // Gives back what was made: chunks, reservation, streams.
  void release() noexcept;

  const CudaDriver& driver_;
  CudaContext context_;
  CUstream capture_stream_ = nullptr;
  CUstream read_stream_ = nullptr;
  std::size_t granularity_ = 0;
  std::string name_;
  CUdeviceptr base_ = 0;
  std::size_t size_ = 0;
  struct Chunk {
    std::size_t offset;
    std::size_t bytes;
    CUmemGenericAllocationHandle handle;
  };
  std::vector<Chunk> chunks_;  // only the mapping thread appends, before the destructor runs
};

}  // namespace resurgo::gpu
