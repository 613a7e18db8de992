// The CUDA driver API, loaded at run time: one build runs with and without a
// GPU. dlopen("libcuda.so.1"), dlsym of cuGetProcAddress alone, and every
// other entry point through it, so each call gets the versioned symbol that
// matches the prototype in the <cuda.h> this was compiled against. Entry
// points are asked for with CU_GET_PROC_ADDRESS_LEGACY_STREAM: the null
// stream of the calls below is the legacy default stream whatever the
// application was compiled with. Nothing links libcuda or libcudart.
//
// cuCtxSetCurrent is in the list for tests and benchmarks, which play the
// application; the library itself only pushes and pops (cuda_context.h).
#pragma once

#include <cuda.h>

#include <string>

#include "gpu/gpu_error.h"

namespace resurgo::gpu {

// X(name, version) for every entry point used. `name` is the base name
// (cuMemAlloc, not cuMemAlloc_v2): cuGetProcAddress takes it and hands out
// the newest variant introduced at or before the version asked for.
// `version` is the variant whose prototype <cuda.h> declares under that name
// (cudaTypedefs.h's PFN_<name>_v<version>; cuda_driver.cpp checks each at
// compile time), and is what the loader asks for (or the driver's version,
// when older): asking for the headers' CUDA_VERSION instead would hand out
// cuCtxGetDevice_v2 from a CUDA 13 driver, which takes a second argument
// <cuda.h> does not declare.
// clang-format off
#if CUDA_VERSION >= 12080
#define RESURGO_CUDA_EVENT_ELAPSED_TIME_VERSION 12080
#else
#define RESURGO_CUDA_EVENT_ELAPSED_TIME_VERSION 2000
#endif
// cuMemPrefetchAsync is cuMemPrefetchAsync_v2 (a CUmemLocation) in <cuda.h>
// from CUDA 13 on.
#if CUDA_VERSION >= 13000
#define RESURGO_CUDA_MEM_PREFETCH_VERSION 12020
#else
#define RESURGO_CUDA_MEM_PREFETCH_VERSION 8000
#endif
#define RESURGO_CUDA_ENTRY_POINTS(X)                                                                      \
  X(cuGetErrorName, 6000) X(cuGetErrorString, 6000) X(cuInit, 2000) X(cuDeviceGet, 2000)                 \
  X(cuDeviceGetCount, 2000) X(cuDeviceGetName, 2000) X(cuDevicePrimaryCtxRetain, 7000)                    \
  X(cuDevicePrimaryCtxRelease, 11000) X(cuDevicePrimaryCtxGetState, 7000) X(cuCtxSetCurrent, 4000)        \
  X(cuCtxGetCurrent, 4000) X(cuCtxGetDevice, 2000) X(cuCtxPushCurrent, 4000) X(cuCtxPopCurrent, 4000)     \
  X(cuCtxSynchronize, 2000)                                                                              \
  X(cuMemGetAllocationGranularity, 10020) X(cuMemAddressReserve, 10020) X(cuMemAddressFree, 10020)        \
  X(cuMemCreate, 10020) X(cuMemRelease, 10020) X(cuMemMap, 10020) X(cuMemUnmap, 10020)                    \
  X(cuMemSetAccess, 10020) X(cuMemAlloc, 3020) X(cuMemFree, 3020) X(cuMemAllocManaged, 6000)              \
  X(cuMemHostAlloc, 2020) X(cuMemFreeHost, 2000) X(cuMemHostRegister, 6050) X(cuMemHostUnregister, 4000)  \
  X(cuMemcpyDtoDAsync, 3020) X(cuMemcpyDtoHAsync, 3020) X(cuMemcpyHtoDAsync, 3020) X(cuMemcpyDtoH, 3020)  \
  X(cuMemcpyHtoD, 3020) X(cuMemsetD8Async, 3020) X(cuStreamCreate, 2000) X(cuStreamDestroy, 4000)         \
  X(cuStreamSynchronize, 2000) X(cuEventCreate, 2000) X(cuEventRecord, 2000) X(cuEventSynchronize, 2000)  \
  X(cuEventElapsedTime, RESURGO_CUDA_EVENT_ELAPSED_TIME_VERSION) X(cuEventDestroy, 4000)                  \
  X(cuPointerGetAttribute, 4000) X(cuMemRangeGetAttribute, 8000)
// Entry points a usable driver may lack (left null): each asked for at its
// variant's version only, never at an older one whose prototype differs
// (cuMemPrefetchAsync_v2 came with CUDA 12.2; a 12.0 driver has only the
// CUDA 8 one).
#define RESURGO_CUDA_OPTIONAL_ENTRY_POINTS(X) X(cuMemPrefetchAsync, RESURGO_CUDA_MEM_PREFETCH_VERSION)
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

#define RESURGO_CUDA_MEMBER(name, version) decltype(&::name) name = nullptr;
  RESURGO_CUDA_ENTRY_POINTS(RESURGO_CUDA_MEMBER)
  RESURGO_CUDA_OPTIONAL_ENTRY_POINTS(RESURGO_CUDA_MEMBER)
#undef RESURGO_CUDA_MEMBER

 private:
  std::string load(const std::string& library);

  void* handle_ = nullptr;
  int version_ = 0;
  std::string why_unavailable_;
};

}  // namespace resurgo::gpu
