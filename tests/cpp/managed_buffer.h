// cuMemAllocManaged memory for the managed-memory suites (issue 29), which
// run against the fake CUDA driver (fake_cuda_lookup.h): freed with the
// object, or earlier by free() (a region the application frees once a
// checkpoint returned).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "gpu/cuda_driver.h"

namespace resurgo::gpu {

class ManagedBuffer {
 public:
  explicit ManagedBuffer(std::size_t bytes) : bytes_(bytes) {
    driver().check(driver().cuMemAllocManaged(&address_, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged", "test");
  }
  ~ManagedBuffer() { free(); }
  ManagedBuffer(const ManagedBuffer&) = delete;
  ManagedBuffer& operator=(const ManagedBuffer&) = delete;
  void free() {
    if (address_ != 0) driver().check(driver().cuMemFree(address_), "cuMemFree", "test");
    address_ = 0;
  }
  unsigned char* get() const { return reinterpret_cast<unsigned char*>(address_); }
  std::size_t bytes() const { return bytes_; }
  // What host loads see now.
  std::vector<unsigned char> bytes_now() const { return {get(), get() + bytes_}; }
  bool holds(const std::vector<unsigned char>& expected) const {
    return expected.size() == bytes_ && std::memcmp(get(), expected.data(), bytes_) == 0;
  }

 private:
  static const CudaDriver& driver() { return CudaDriver::instance(); }
  std::size_t bytes_;
  CUdeviceptr address_ = 0;
};

}  // namespace resurgo::gpu
