// How a store reaches the application's device regions outside the L0
// cache: device-to-host copies (a version that does not fit L0, or a store
// without L0), host-to-device copies (restart), and what kind of memory a
// pointer is and on which device. Two backends as for the cache
// (device_memory.h): the CUDA driver, and host memory standing for the
// device (tests, host analog).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/device_memory.h"
#include "gpu/host_pinner.h"
#include "resurgo/config.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo::gpu {

// What a pointer points to. `device` is the ordinal of the device that holds
// device or managed memory (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL), -1 for
// host memory or where the driver does not say.
struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;
};

// Where managed memory was last put (DeviceAccess::residence), when not on
// a device: the host, or nowhere the driver can say (the values of
// CU_DEVICE_CPU and CU_DEVICE_INVALID).
inline constexpr int kResidentOnHost = -1;
inline constexpr int kResidenceUnknown = -2;

class DeviceAccess {
 public:
  virtual ~DeviceAccess() = default;

  // "cuda (device 0 (NVIDIA H100 80GB HBM3))", "host": for log lines.
  virtual std::string name() const = 0;
  // The device whose context every copy runs in.
  virtual int device() const = 0;
  // How many devices there are: the ordinals below it are valid.
  virtual int device_count() const { return 1; }
  // What `pointer` points to; none when the backend cannot tell (host).
  virtual std::optional<PointerInfo> describe(const void* pointer) const = 0;
  // Waits for the work queued on `streams` (CUstream handles of the
  // device's context), or in the whole context (every stream) when there
  // is none, so that what kernels wrote to managed memory is what a copy
  // reads: the host (and the driver's copies) may see stale bytes until
  // then. Throws GpuError when that work failed. Host memory standing for
  // the device has no queued work.
  virtual void synchronize(const std::vector<void*>& /*streams*/) {}
  // Synchronous copies: the bytes are in place when they return. Throw
  // GpuError naming the copy.
  virtual void to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, std::size_t bytes) = 0;
  // A host-to-device copy that may still run when it returns (restart from
  // pinned pieces of L1: the copies of all spans are queued, then waited for
  // once). `host` must not change until wait_to_device() returned. Throws
  // GpuError naming the copy when the driver refuses it. Default: to_device.
  virtual void to_device_async(void* device, const void* host, std::size_t bytes) { to_device(device, host, bytes); }
  // Waits for every to_device_async copy; throws GpuError when one failed.
  virtual void wait_to_device() {}
  // Where the driver last put all of the `bytes` of managed memory at
  // `managed`: the device ordinal or kResidentOnHost its last prefetch
  // went to, else kResidenceUnknown (never prefetched, parts to different
  // places, or a driver that does not say). The driver keeps no record of
  // where kernels' page faults moved the pages. Never throws; host memory
  // standing for the device: unknown.
  virtual int residence(const void* /*managed*/, std::size_t /*bytes*/) const { return kResidenceUnknown; }
  // Starts moving the `bytes` of managed memory at `managed` to device
  // `ordinal`, below device_count() (restart: the copy back may leave pages
  // on the host, where the application's kernels would fault them over one
  // at a time). Throws GpuError when the driver refuses. Host memory
  // standing for the device stays where it is.
  virtual void prefetch_to_device(void* /*managed*/, std::size_t /*bytes*/, int /*ordinal*/) {}
};

// The backends `backend` names, on device `ordinal`. Throw GpuError saying
// why the CUDA driver cannot be used (absent, stub, too old, no device).
std::unique_ptr<DeviceAccess> open_device_access(DeviceBackend backend, int ordinal = 0);
std::unique_ptr<DeviceMemory> open_device_memory(DeviceBackend backend, int ordinal = 0);
// cuMemHostRegister for the CUDA backend, mlock (its host stand-in) otherwise.
std::unique_ptr<HostPinner> open_host_pinner(DeviceBackend backend, int ordinal = 0);

// The device a store uses (docs/gpu.md, "Which device"): device.ordinal
// when it names one; for "auto", the device of `first_region` (a device
// pointer, when the store has no L0 to place), else of the calling
// thread's current context (the one the application chose, e.g. with
// cudaSetDevice), else the node-local rank modulo the visible devices.
// Always 0 for the host backend. Throws ConfigError naming the key, the
// ordinal and the count when the ordinal is not below the visible devices,
// GpuError when the CUDA driver cannot be used.
int store_device(const Config::Device& config, const void* first_region = nullptr);

// This process's rank among those of its job on its node, from the MPI
// launcher's or the batch system's environment; 0 when none says.
int node_local_rank();

// What `pointer` is, asked of the backend's driver (loaded if need be);
// none for the host backend. Throws GpuError when the CUDA driver cannot be
// used.
std::optional<PointerInfo> describe_pointer(DeviceBackend backend, const void* pointer);

// What `pointer` is when this process already uses the CUDA driver (it is
// loaded); none otherwise. A process that never loaded the driver holds no
// device pointers, and a check must not load and initialise CUDA in
// applications that use none.
std::optional<PointerInfo> describe_if_cuda_is_loaded(const void* pointer);

}  // namespace resurgo::gpu
