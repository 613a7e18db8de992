#include "gpu/cuda_device_access.h"

namespace resurgo::gpu {

CudaDeviceAccess::CudaDeviceAccess(const CudaDriver& driver) : driver_(driver) {
  driver_.require();
  driver_.check(driver_.cuDeviceGet(&device_, 0), "cuDeviceGet", "device 0");
  driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", "device 0");
}

CudaDeviceAccess::~CudaDeviceAccess() { driver_.cuDevicePrimaryCtxRelease(device_); }

void CudaDeviceAccess::make_current() const {
  driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
}

MemoryKind CudaDeviceAccess::kind(const CudaDriver& driver, const void* pointer) {
  const auto address = reinterpret_cast<CUdeviceptr>(pointer);
  unsigned int managed = 0;
  if (driver.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address) == CUDA_SUCCESS && managed) {
    return MemoryKind::kManaged;
  }
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  const bool known = driver.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) == CUDA_SUCCESS;
  return known && type == CU_MEMORYTYPE_DEVICE ? MemoryKind::kDevice : MemoryKind::kHost;
}

std::optional<MemoryKind> CudaDeviceAccess::kind_of(const void* pointer) const {
  make_current();
  return kind(driver_, pointer);
}

void CudaDeviceAccess::to_host(void* host, const void* device, std::size_t bytes) {
  make_current();
  driver_.check(driver_.cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(device), bytes), "cuMemcpyDtoH",
                std::to_string(bytes) + " bytes of a device region to host memory");
}

void CudaDeviceAccess::to_device(void* device, const void* host, std::size_t bytes) {
  make_current();
  driver_.check(driver_.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(device), host, bytes), "cuMemcpyHtoD",
                std::to_string(bytes) + " bytes back into a device region");
}

}  // namespace resurgo::gpu
