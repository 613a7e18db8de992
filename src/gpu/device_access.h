// How a store reaches the application's device regions outside the L0
// cache: device-to-host copies (a version that does not fit L0, or a store
// without L0), host-to-device copies (restart), and what kind of memory a
// pointer is. Two backends as for the cache (device_memory.h): the CUDA
// driver, and host memory standing for the device (tests, host analog).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "gpu/device_memory.h"
#include "gpu/host_pinner.h"
#include "resurgo/config.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo::gpu {

class DeviceAccess {
 public:
  virtual ~DeviceAccess() = default;

  virtual std::string name() const = 0;
  // What `pointer` points to; none when the backend cannot tell (host).
  virtual std::optional<MemoryKind> kind_of(const void* pointer) const = 0;
  // Synchronous copies; throw GpuError naming the copy.
  virtual void to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void to_device(void* device, const void* host, std::size_t bytes) = 0;
};

// The backends `backend` names. Throw GpuError saying why the CUDA driver
// cannot be used (absent, stub, too old, no device).
std::unique_ptr<DeviceAccess> open_device_access(DeviceBackend backend);
std::unique_ptr<DeviceMemory> open_device_memory(DeviceBackend backend);
// cuMemHostRegister for the CUDA backend, mlock (its host stand-in) otherwise.
std::unique_ptr<HostPinner> open_host_pinner(DeviceBackend backend);

// The kind of `pointer` when this process already uses the CUDA driver (it
// is loaded); none otherwise. A process that never loaded the driver holds
// no device pointers, and a check must not load and initialise CUDA in
// applications that use none.
std::optional<MemoryKind> kind_if_cuda_is_loaded(const void* pointer);

}  // namespace resurgo::gpu
