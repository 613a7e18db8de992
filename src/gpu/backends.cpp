#include <link.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/printable.h"
#include "gpu/device_access.h"
#include "gpu/gpu_error.h"
#include "gpu/host_memory.h"
#include "resurgo/errors.hpp"
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

// `ordinal` when it is below `count`, the devices the driver shows this
// process (CUDA_VISIBLE_DEVICES applied).
[[maybe_unused]] int checked_ordinal(int ordinal, int count) {
  if (ordinal < count) return ordinal;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  throw ConfigError("configuration key 'device.ordinal': device " + std::to_string(ordinal) + " is not visible: " +
                    std::to_string(count) + " CUDA device" + (count == 1 ? " is" : "s are") +
                    " visible to this process (CUDA_VISIBLE_DEVICES " +
                    (visible ? "= '" + printable(visible) + "'" : std::string("unset")) + "); give an ordinal below " +
                    std::to_string(count) + " or \"auto\"");
}

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

int store_device(const Config::Device& config, const void* first_region) {
  if (config.backend == DeviceBackend::kHost) return 0;
#ifdef RESURGO_HAVE_CUDA_HEADERS
  const CudaDriver& driver = CudaDriver::instance();
  driver.require();
  int count = 0;
  driver.check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount", "the devices visible to this process");
  if (config.ordinal != kAutoDevice) return checked_ordinal(config.ordinal, count);
  if (first_region != nullptr) {
    const PointerInfo info = CudaDeviceAccess::describe(driver, first_region);
    if (info.device >= 0) return info.device;
  }
  if (const std::optional<int> current = CudaDeviceAccess::current_device(driver)) return *current;
  if (count == 0) return checked_ordinal(0, count);
  return node_local_rank() % count;
#else
  (void)first_region;
  no_cuda_support();
#endif
}

int node_local_rank() {
  // Open MPI, MPICH and Intel MPI (Hydra), MVAPICH, Cray PALS, Slurm.
  static const char* const kVariables[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                                           "PALS_LOCAL_RANKID", "SLURM_LOCALID"};
  for (const char* variable : kVariables) {
    const char* value = std::getenv(variable);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank <= INT_MAX) return static_cast<int>(rank);
  }
  return 0;
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

#ifdef RESURGO_HAVE_CUDA_HEADERS
namespace {

// Whether the process has loaded the CUDA driver library (CuPy, PyTorch or
// the application did): a walk over the loaded objects, in memory. A
// dlopen("libcuda.so.1", RTLD_NOLOAD) answers the same but searches the
// library path, opening files, at every call: every protect() of host
// memory paid for it where libcuda is installed (a perf profile of a
// re-protect put most of its time there).
bool cuda_driver_loaded() {
  const auto is_libcuda = [](dl_phdr_info* info, std::size_t, void*) {
    const char* slash = std::strrchr(info->dlpi_name, '/');
    const char* name = slash != nullptr ? slash + 1 : info->dlpi_name;
    return std::strncmp(name, "libcuda.so", std::strlen("libcuda.so")) == 0 ? 1 : 0;
  };
  return ::dl_iterate_phdr(is_libcuda, nullptr) != 0;
}

}  // namespace
#endif

std::optional<PointerInfo> describe_if_cuda_is_loaded(const void* pointer) {
#ifdef RESURGO_HAVE_CUDA_HEADERS
  if (!cuda_driver_loaded() || !CudaDriver::instance().available()) return std::nullopt;
  return describe_pointer(DeviceBackend::kCuda, pointer);
#else
  (void)pointer;
  return std::nullopt;
#endif
}

}  // namespace resurgo::gpu
