#include "gpu/cuda_driver.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <type_traits>

namespace resurgo::gpu {

namespace {
// The oldest driver whose cuGetProcAddress takes the symbol status argument.
constexpr int kOldestDriver = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using DriverGetVersion = CUresult (*)(int*);

// Each member's type (the prototype <cuda.h> declares) is the prototype of
// the variant the loader asks for.
#define RESURGO_PASTE_NOW(a, b) a##b
#define RESURGO_PASTE(a, b) RESURGO_PASTE_NOW(a, b)  // after expanding `b` (a version macro)
#define RESURGO_CUDA_CHECK_VARIANT(name, version)                                                  \
  static_assert(std::is_same_v<decltype(&::name), RESURGO_PASTE(PFN_##name##_v, version)>,         \
                #name ": <cuda.h> declares another variant than the one asked for (cuda_driver.h)");
RESURGO_CUDA_ENTRY_POINTS(RESURGO_CUDA_CHECK_VARIANT)
RESURGO_CUDA_OPTIONAL_ENTRY_POINTS(RESURGO_CUDA_CHECK_VARIANT)
#undef RESURGO_CUDA_CHECK_VARIANT
#undef RESURGO_PASTE
#undef RESURGO_PASTE_NOW
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
  // Each entry point at the version of its declared variant, or of the
  // driver when that is older (the variant's prototype is then the same).
  std::string missing;
  auto resolve = [&](const char* name, int variant, void** slot) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const int wanted = std::min(version_, variant);
    if (get_proc_address(name, slot, wanted, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS || *slot == nullptr) {
      *slot = nullptr;
      missing += missing.empty() ? name : std::string(", ") + name;
    }
  };
#define RESURGO_CUDA_RESOLVE(name, version) resolve(#name, version, reinterpret_cast<void**>(&name));
  RESURGO_CUDA_ENTRY_POINTS(RESURGO_CUDA_RESOLVE)
#undef RESURGO_CUDA_RESOLVE
  if (!missing.empty()) return library + " lacks entry points: " + missing;
  auto resolve_optional = [&](const char* name, int variant, void** slot) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (version_ < variant || get_proc_address(name, slot, variant, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) !=
                                  CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) {
      *slot = nullptr;
    }
  };
#define RESURGO_CUDA_RESOLVE(name, version) resolve_optional(#name, version, reinterpret_cast<void**>(&name));
  RESURGO_CUDA_OPTIONAL_ENTRY_POINTS(RESURGO_CUDA_RESOLVE)
#undef RESURGO_CUDA_RESOLVE
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
