#include "gpu/cuda_host_pinner.h"

namespace resurgo::gpu {

CudaHostPinner::CudaHostPinner(int device, const CudaDriver& driver) : driver_(driver) {
  driver_.require();
  const std::string what = "device " + std::to_string(device) + ", to pin the host buffer";
  driver_.check(driver_.cuDeviceGet(&device_, device), "cuDeviceGet", what);
  driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", what);
}

CudaHostPinner::~CudaHostPinner() { driver_.cuDevicePrimaryCtxRelease(device_); }

void CudaHostPinner::pin(void* data, std::size_t bytes) {
  const std::string what = describe_pin_range(data, bytes) + " of the host buffer";
  driver_.check(driver_.cuCtxSetCurrent(context_), "cuCtxSetCurrent", what);
  driver_.check(driver_.cuMemHostRegister(data, bytes, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister", what);
}

// Errors are ignored: the range was registered by pin(), and a driver that
// fails here (device lost) has nothing left to give back.
void CudaHostPinner::unpin(void* data, std::size_t) noexcept {
  if (driver_.cuCtxSetCurrent(context_) == CUDA_SUCCESS) driver_.cuMemHostUnregister(data);
}

}  // namespace resurgo::gpu
