#include "gpu/cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>

namespace resurgo::gpu {

namespace {
// The oldest driver whose cuGetProcAddress takes the symbol status argument.
constexpr int kOldestDriver = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using DriverGetVersion = CUresult (*)(int*);
}  // namespace

const CudaDriver& CudaDriver::instance() {
  static const CudaDriver* const driver = new CudaDriver("libcuda.so.1");
  return *driver;
}

CudaDriver::CudaDriver(const std::string& library) { why_unavailable_ = load(library); }

CudaDriver::~CudaDriver() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

// Returns why the driver is unusable, or "" once every entry point is
// resolved and cuInit succeeded.
std::string CudaDriver::load(const std::string& library) {
  handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* error = ::dlerror();
    return library + " not found (" + (error ? error : "no dlerror text") + ")";
  }
  auto driver_get_version = reinterpret_cast<DriverGetVersion>(::dlsym(handle_, "cuDriverGetVersion"));
  auto get_proc_address = reinterpret_cast<GetProcAddress>(::dlsym(handle_, "cuGetProcAddress_v2"));
  if (driver_get_version == nullptr || get_proc_address == nullptr) {
    return library + " is older than CUDA 12 (no cuGetProcAddress_v2); update the NVIDIA driver";
  }
  const CUresult got_version = driver_get_version(&version_);
  if (got_version == CUDA_ERROR_STUB_LIBRARY) {
    return library + " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not an NVIDIA driver";
  }
  if (got_version != CUDA_SUCCESS) {
    return library + ": cuDriverGetVersion failed (CUresult " + std::to_string(static_cast<int>(got_version)) + ")";
  }
  if (version_ < kOldestDriver) {
    return library + " reports CUDA " + std::to_string(version_ / 1000) + "." + std::to_string(version_ % 1000 / 10) +
           "; CUDA 12.0 or newer is needed";
  }
  // Ask for the versions of the headers compiled against, or of the driver
  // when it is older: the prototypes of these entry points did not change
  // between the two.
  const int wanted = std::min(version_, CUDA_VERSION);
  std::string missing;
  auto resolve = [&](const char* name, void** slot) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get_proc_address(name, slot, wanted, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS || *slot == nullptr) {
      *slot = nullptr;
      missing += missing.empty() ? name : std::string(", ") + name;
    }
  };
#define RESURGO_CUDA_RESOLVE(name) resolve(#name, reinterpret_cast<void**>(&name));
  RESURGO_CUDA_ENTRY_POINTS(RESURGO_CUDA_RESOLVE)
#undef RESURGO_CUDA_RESOLVE
  if (!missing.empty()) return library + " lacks entry points: " + missing;
  const CUresult init = cuInit(0);
  if (init != CUDA_SUCCESS) return "cuInit: " + describe(init);
  return "";
}

void CudaDriver::require() const {
  if (!available()) throw GpuError("the CUDA driver is unavailable: " + why_unavailable_, 0);
}

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) {
    return "CUresult " + std::to_string(static_cast<int>(result));
  }
  if (cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) return name;
  return std::string(name) + ": " + text;
}

void CudaDriver::check(CUresult result, const char* call, const std::string& what) const {
  if (result == CUDA_SUCCESS) return;
  throw GpuError(std::string(call) + " (" + what + "): " + describe(result), static_cast<int>(result));
}

}  // namespace resurgo::gpu
