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

namespace {

// The kind of `address`, or CUDA_ERROR_INVALID_CONTEXT when the driver wants
// a current context to answer.
CUresult query_kind(const CudaDriver& driver, CUdeviceptr address, MemoryKind& kind) {
  unsigned int managed = 0;
  const CUresult asked_managed = driver.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address);
  if (asked_managed == CUDA_ERROR_INVALID_CONTEXT) return asked_managed;
  if (asked_managed == CUDA_SUCCESS && managed) {
    kind = MemoryKind::kManaged;
    return CUDA_SUCCESS;
  }
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  const CUresult asked_type = driver.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
  if (asked_type == CUDA_ERROR_INVALID_CONTEXT) return asked_type;
  kind = asked_type == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE ? MemoryKind::kDevice : MemoryKind::kHost;
  return CUDA_SUCCESS;
}

}  // namespace

MemoryKind CudaDeviceAccess::kind(const CudaDriver& driver, const void* pointer) {
  const auto address = reinterpret_cast<CUdeviceptr>(pointer);
  MemoryKind kind = MemoryKind::kHost;
  if (query_kind(driver, address, kind) != CUDA_ERROR_INVALID_CONTEXT) return kind;
  CUdevice device = 0;
  CUcontext primary = nullptr;
  if (driver.cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      driver.cuDevicePrimaryCtxRetain(&primary, device) != CUDA_SUCCESS) {
    return kind;
  }
  if (driver.cuCtxPushCurrent(primary) == CUDA_SUCCESS) {
    query_kind(driver, address, kind);
    CUcontext popped = nullptr;
    driver.cuCtxPopCurrent(&popped);
  }
  driver.cuDevicePrimaryCtxRelease(device);
  return kind;
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
