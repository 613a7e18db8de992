// The CUDA driver as the GPU tests call it: the process's CudaDriver, and a
// driver call's result checked with "test" named as the caller.
#pragma once

#ifdef RESURGO_HAVE_CUDA_HEADERS

#include "gpu/cuda_driver.h"

namespace resurgo::gpu {

inline const CudaDriver& cuda() { return CudaDriver::instance(); }
inline void check(CUresult result, const char* call) { cuda().check(result, call, "test"); }

}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
