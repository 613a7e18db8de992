#include <dlfcn.h>

#include <cstring>

#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "gpu/host_memory.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_device_access.h"
#include "gpu/cuda_host_pinner.h"
#include "gpu/cuda_vmm_memory.h"
#endif

namespace resurgo::gpu {

namespace {

// Host memory standing for device memory: the copies are memcpy.
class HostDeviceAccess final : public DeviceAccess {
 public:
  std::string name() const override { return "host"; }
  int device() const override { return 0; }
  std::optional<PointerInfo> describe(const void*) const override { return std::nullopt; }
  void to_host(void* host, const void* device, std::size_t bytes) override { std::memcpy(host, device, bytes); }
  void to_device(void* device, const void* host, std::size_t bytes) override { std::memcpy(device, host, bytes); }
};

#ifndef RESURGO_HAVE_CUDA_HEADERS
[[noreturn]] void no_cuda_support() {
  throw GpuError("this build of resurgo has no CUDA support (cuda.h was not found when it was built; set CUDA_HOME "
                 "and rebuild), so device regions need device.backend = \"host\"",
                 0);
}
#endif

}  // namespace

std::unique_ptr<DeviceAccess> open_device_access(DeviceBackend backend, int ordinal) {
  if (backend == DeviceBackend::kHost) return std::make_unique<HostDeviceAccess>();
#ifdef RESURGO_HAVE_CUDA_HEADERS
  return std::make_unique<CudaDeviceAccess>(ordinal);
#else
  (void)ordinal;
  no_cuda_support();
#endif
}

std::unique_ptr<DeviceMemory> open_device_memory(DeviceBackend backend, int ordinal) {
  if (backend == DeviceBackend::kHost) return std::make_unique<HostMemory>();
#ifdef RESURGO_HAVE_CUDA_HEADERS
  return std::make_unique<CudaVmmMemory>(ordinal);
#else
  (void)ordinal;
  no_cuda_support();
#endif
}

std::unique_ptr<HostPinner> open_host_pinner(DeviceBackend backend, int ordinal) {
  if (backend == DeviceBackend::kHost) return make_mlock_pinner();
#ifdef RESURGO_HAVE_CUDA_HEADERS
  return std::make_unique<CudaHostPinner>(ordinal);
#else
  (void)ordinal;
  no_cuda_support();
#endif
}

int current_device(DeviceBackend backend) {
  if (backend == DeviceBackend::kHost) return 0;
#ifdef RESURGO_HAVE_CUDA_HEADERS
  CudaDriver::instance().require();
  return CudaDeviceAccess::current_device(CudaDriver::instance()).value_or(0);
#else
  no_cuda_support();
#endif
}

std::optional<PointerInfo> describe_pointer(DeviceBackend backend, const void* pointer) {
  if (backend == DeviceBackend::kHost) return std::nullopt;
#ifdef RESURGO_HAVE_CUDA_HEADERS
  CudaDriver::instance().require();
  return CudaDeviceAccess::describe(CudaDriver::instance(), pointer);
#else
  (void)pointer;
  no_cuda_support();
#endif
}

std::optional<PointerInfo> describe_if_cuda_is_loaded(const void* pointer) {
#ifdef RESURGO_HAVE_CUDA_HEADERS
  void* loaded = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (loaded == nullptr) return std::nullopt;
  ::dlclose(loaded);
  if (!CudaDriver::instance().available()) return std::nullopt;
  return describe_pointer(DeviceBackend::kCuda, pointer);
#else
  (void)pointer;
  return std::nullopt;
#endif
}

}  // namespace resurgo::gpu
