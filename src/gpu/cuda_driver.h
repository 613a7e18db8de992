// The CUDA driver API, loaded at run time: one build runs with and without a
// GPU. dlopen("libcuda.so.1"), dlsym of cuGetProcAddress alone, and every
// other entry point through it, so each call gets the versioned symbol that
// matches the prototype in the <cuda.h> this was compiled against. Nothing
// links libcuda or libcudart.
#pragma once

#include <cuda.h>

#include <string>

#include "gpu/gpu_error.h"

namespace resurgo::gpu {

// X(name) for every entry point used. `name` is the base name (cuMemAlloc,
// not cuMemAlloc_v2): cuGetProcAddress takes it and picks the version, and
// <cuda.h>'s macros give the member the versioned prototype.
// clang-format off
#define RESURGO_CUDA_ENTRY_POINTS(X)                                                                         \
  X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDeviceGet) X(cuDeviceGetName)                          \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxPushCurrent)           \
  X(cuCtxPopCurrent)                                                                                         \
  X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) \
  X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocManaged)                \
  X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostRegister) X(cuMemHostUnregister)                             \
  X(cuMemcpyDtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoH) X(cuMemcpyHtoD)             \
  X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                            \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy)            \
  X(cuPointerGetAttribute)
// clang-format on

class CudaDriver {
 public:
  // The process-wide driver (libcuda.so.1), loaded and initialised on first
  // use and never unloaded (threads may call it until the process exits).
  static const CudaDriver& instance();

  // Loads `library` and runs cuInit(0). Never throws: a failure leaves the
  // driver unavailable with the reason. Tests name a library that is absent.
  explicit CudaDriver(const std::string& library);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  bool available() const { return why_unavailable_.empty(); }
  // Empty when available; else one line: "libcuda.so.1 not found (...)",
  // "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", ...
  const std::string& why_unavailable() const { return why_unavailable_; }
  // Throws GpuError with why_unavailable() unless available().
  void require() const;
  // The driver's CUDA version (e.g. 13000), 0 when it could not be read.
  int version() const { return version_; }

  // "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for `result`.
  std::string describe(CUresult result) const;
  // Throws GpuError("<call> (<what>): <describe(result)>") unless result is CUDA_SUCCESS.
  void check(CUresult result, const char* call, const std::string& what) const;

#define RESURGO_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
  RESURGO_CUDA_ENTRY_POINTS(RESURGO_CUDA_MEMBER)
#undef RESURGO_CUDA_MEMBER

 private:
  std::string load(const std::string& library);

  void* handle_ = nullptr;
  int version_ = 0;
  std::string why_unavailable_;
};

}  // namespace resurgo::gpu
