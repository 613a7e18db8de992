#include "gpu/cuda_context.h"

namespace resurgo::gpu {

CudaContext::CudaContext(int ordinal, const CudaDriver& driver) : driver_(driver), ordinal_(ordinal) {
  driver_.require();
  name_ = "device " + std::to_string(ordinal);
  driver_.check(driver_.cuDeviceGet(&device_, ordinal), "cuDeviceGet", name_);
  char device_name[256] = {};
  driver_.check(driver_.cuDeviceGetName(device_name, sizeof device_name, device_), "cuDeviceGetName", name_);
  name_ += std::string(": ") + device_name;
  driver_.check(driver_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain", name_);
}

CudaContext::~CudaContext() { driver_.cuDevicePrimaryCtxRelease(device_); }

CudaContext::Scope::Scope(const CudaContext& context) : driver_(context.driver_) {
  driver_.check(driver_.cuCtxPushCurrent(context.context_), "cuCtxPushCurrent", context.name_);
  pushed_ = true;
}

CudaContext::Scope::Scope(const CudaContext& context, std::nothrow_t) noexcept
    : driver_(context.driver_), pushed_(driver_.cuCtxPushCurrent(context.context_) == CUDA_SUCCESS) {}

CudaContext::Scope::~Scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver_.cuCtxPopCurrent(&popped);
}

}  // namespace resurgo::gpu
