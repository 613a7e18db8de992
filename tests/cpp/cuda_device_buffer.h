// Device memory from cuMemAlloc in the calling thread's current context,
// freed with the object: the GPU tests' stand-in for an application's
// device array (the real driver on a GPU, the fake one otherwise).
#pragma once

#include <cstddef>
#include <vector>

#include "gpu/cuda_driver.h"

namespace resurgo::testing {

class CudaDeviceBuffer {
 public:
  explicit CudaDeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    driver().check(driver().cuMemAlloc(&address_, bytes), "cuMemAlloc", "a test's device buffer");
  }
  ~CudaDeviceBuffer() { driver().cuMemFree(address_); }
  CudaDeviceBuffer(const CudaDeviceBuffer&) = delete;
  CudaDeviceBuffer& operator=(const CudaDeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(address_); }
  CUdeviceptr address() const { return address_; }
  // As an application finishes writing a region before checkpoint(): a
  // cuMemcpyHtoD from pageable memory returns before the bytes landed.
  void upload(const std::vector<unsigned char>& bytes) const {
    driver().check(driver().cuMemcpyHtoD(address_, bytes.data(), bytes.size()), "cuMemcpyHtoD", "a test");
    driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "a test");
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> bytes(bytes_);
    driver().check(driver().cuMemcpyDtoH(bytes.data(), address_, bytes_), "cuMemcpyDtoH", "a test");
    return bytes;
  }

 private:
  static const gpu::CudaDriver& driver() { return gpu::CudaDriver::instance(); }

  std::size_t bytes_;
  CUdeviceptr address_ = 0;
};

}  // namespace resurgo::testing
