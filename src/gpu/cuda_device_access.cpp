#include "gpu/cuda_device_access.h"

#include "gpu/gpu_error.h"

namespace resurgo::gpu {

CudaDeviceAccess::CudaDeviceAccess(int ordinal, const CudaDriver& driver) : driver_(driver), context_(ordinal, driver) {}

namespace {

// What `address` is, or CUDA_ERROR_INVALID_CONTEXT when the driver wants a
// current context to answer.
CUresult query(const CudaDriver& driver, CUdeviceptr address, PointerInfo& info) {
  unsigned int managed = 0;
  const CUresult asked_managed = driver.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, address);
  if (asked_managed == CUDA_ERROR_INVALID_CONTEXT) return asked_managed;
  CUmemorytype type = CU_MEMORYTYPE_HOST;
  const CUresult asked_type = driver.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address);
  if (asked_type == CUDA_ERROR_INVALID_CONTEXT) return asked_type;
  info = PointerInfo{};
  if (asked_managed == CUDA_SUCCESS && managed) {
    info.kind = MemoryKind::kManaged;
  } else if (asked_type == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE) {
    info.kind = MemoryKind::kDevice;
  } else {
    return CUDA_SUCCESS;
  }
  int ordinal = -1;
  if (driver.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address) == CUDA_SUCCESS) {
    info.device = ordinal;
  }
  return CUDA_SUCCESS;
}

// Asks under the first active primary context; false when none is active.
bool query_under_an_active_context(const CudaDriver& driver, CUdeviceptr address, PointerInfo& info) {
  int count = 0;
  if (driver.cuDeviceGetCount(&count) != CUDA_SUCCESS) return false;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (driver.cuDeviceGet(&device, ordinal) != CUDA_SUCCESS ||
        driver.cuDevicePrimaryCtxGetState(device, &flags, &active) != CUDA_SUCCESS || !active) {
      continue;
    }
    CUcontext primary = nullptr;
    if (driver.cuDevicePrimaryCtxRetain(&primary, device) != CUDA_SUCCESS) continue;
    bool asked = false;
    if (driver.cuCtxPushCurrent(primary) == CUDA_SUCCESS) {
      asked = query(driver, address, info) == CUDA_SUCCESS;
      CUcontext popped = nullptr;
      driver.cuCtxPopCurrent(&popped);
    }
    driver.cuDevicePrimaryCtxRelease(device);
    if (asked) return true;
  }
  return false;
}

}  // namespace

PointerInfo CudaDeviceAccess::describe(const CudaDriver& driver, const void* pointer) {
  const auto address = reinterpret_cast<CUdeviceptr>(pointer);
  PointerInfo info;
  if (query(driver, address, info) == CUDA_SUCCESS || query_under_an_active_context(driver, address, info)) {
    return info;
  }
  return PointerInfo{};
}

// A CUdevice is a handle, not an ordinal: the ordinal is the one cuDeviceGet
// gives that handle for.
std::optional<int> CudaDeviceAccess::current_device(const CudaDriver& driver) {
  CUcontext current = nullptr;
  CUdevice device = 0;
  int count = 0;
  if (driver.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr ||
      driver.cuCtxGetDevice(&device) != CUDA_SUCCESS || driver.cuDeviceGetCount(&count) != CUDA_SUCCESS) {
    return std::nullopt;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice candidate = 0;
    if (driver.cuDeviceGet(&candidate, ordinal) == CUDA_SUCCESS && candidate == device) return ordinal;
  }
  return std::nullopt;
}

std::optional<PointerInfo> CudaDeviceAccess::describe(const void* pointer) const {
  const CudaContext::Scope scope(context_);
  return describe(driver_, pointer);
}

void CudaDeviceAccess::synchronize(const std::vector<void*>& streams) {
  const CudaContext::Scope scope(context_);
  const std::string what = "whose writes to managed memory a checkpoint copies";
  if (streams.empty()) {
    driver_.check(driver_.cuCtxSynchronize(), "cuCtxSynchronize", "the work queued on " + context_.name() + ", " + what);
  }
  for (std::size_t index = 0; index < streams.size(); ++index) {
    driver_.check(driver_.cuStreamSynchronize(static_cast<CUstream>(streams[index])), "cuStreamSynchronize",
                  "capture stream " + std::to_string(index) + " of " + std::to_string(streams.size()) + " on " +
                      context_.name() + ", " + what);
  }
}

void CudaDeviceAccess::to_host(void* host, const void* device, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuMemcpyDtoH(host, reinterpret_cast<CUdeviceptr>(device), bytes), "cuMemcpyDtoH",
                std::to_string(bytes) + " bytes of a device region on " + context_.name() + " to host memory");
}

void CudaDeviceAccess::to_device(void* device, const void* host, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  const std::string what = std::to_string(bytes) + " bytes back into a device region on " + context_.name();
  driver_.check(driver_.cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(device), host, bytes), "cuMemcpyHtoD", what);
  driver_.check(driver_.cuStreamSynchronize(nullptr), "cuStreamSynchronize", what);
}

void CudaDeviceAccess::to_device_async(void* device, const void* host, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(device), host, bytes, nullptr),
                "cuMemcpyHtoDAsync", std::to_string(bytes) + " bytes back into a device region on " + context_.name());
}

void CudaDeviceAccess::wait_to_device() {
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuStreamSynchronize(nullptr), "cuStreamSynchronize",
                "the copies back into device regions on " + context_.name());
}

int CudaDeviceAccess::device_count() const {
  int count = 0;
  return driver_.cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : 0;
}

int CudaDeviceAccess::residence(const void* managed, std::size_t bytes) const {
  const CudaContext::Scope scope(context_);
  int location = kResidenceUnknown;
  const CUresult result = driver_.cuMemRangeGetAttribute(&location, sizeof location,
                                                         CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                                         reinterpret_cast<CUdeviceptr>(managed), bytes);
  return result == CUDA_SUCCESS && location >= kResidenceUnknown ? location : kResidenceUnknown;
}

void CudaDeviceAccess::prefetch_to_device(void* managed, std::size_t bytes, int ordinal) {
  if (driver_.cuMemPrefetchAsync == nullptr) {
    throw GpuError("the driver (CUDA " + std::to_string(driver_.version()) + ") lacks the cuMemPrefetchAsync variant "
                   "this build calls (CUDA " + std::to_string(RESURGO_CUDA_MEM_PREFETCH_VERSION) + ")", 0);
  }
  const CudaContext::Scope scope(context_);
  const auto address = reinterpret_cast<CUdeviceptr>(managed);
  const std::string what = std::to_string(bytes) + " bytes of a managed region to device " + std::to_string(ordinal) +
                           " (from " + context_.name() + ")";
#if CUDA_VERSION >= 13000
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = ordinal;
  const CUresult result = driver_.cuMemPrefetchAsync(address, bytes, location, 0, nullptr);
#else
  CUdevice device = 0;
  driver_.check(driver_.cuDeviceGet(&device, ordinal), "cuDeviceGet", what);
  const CUresult result = driver_.cuMemPrefetchAsync(address, bytes, device, nullptr);
#endif
  driver_.check(result, "cuMemPrefetchAsync", what);
}

}  // namespace resurgo::gpu
