// One device's primary context, retained for the object's lifetime and made
// current only inside a Scope: pushed when the scope opens, popped when it
// closes. Resurgo calls the driver from the application's threads (protect,
// checkpoint, restart, close) and from its own; an application that chose a
// device (cudaSetDevice) or a context of its own must find the same context
// current after each call as before it, so nothing in Resurgo calls
// cuCtxSetCurrent.
#pragma once

#include <cuda.h>

#include <new>
#include <string>

#include "gpu/cuda_driver.h"

namespace resurgo::gpu {

class CudaContext {
 public:
  // Retains the primary context of device `ordinal`. Throws GpuError when
  // the driver is unavailable or the device cannot be opened.
  explicit CudaContext(int ordinal, const CudaDriver& driver = CudaDriver::instance());
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // The context current on the calling thread while it lives.
  class Scope {
   public:
    // Throws GpuError naming the device when the push fails.
    explicit Scope(const CudaContext& context);
    // For teardown, which cannot report errors: a push that fails is
    // ignored, and the calls inside run in whatever context is current.
    Scope(const CudaContext& context, std::nothrow_t) noexcept;
    // Pops what the constructor pushed; errors are ignored (a destructor
    // cannot report them, and the driver failing here has nothing to undo).
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const CudaDriver& driver_;
    bool pushed_ = false;
  };

  const CudaDriver& driver() const { return driver_; }
  int ordinal() const { return ordinal_; }
  CUdevice device() const { return device_; }
  // "device 1: NVIDIA H100 80GB HBM3": for errors and logs.
  const std::string& name() const { return name_; }

 private:
  const CudaDriver& driver_;
  const int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
};

}  // namespace resurgo::gpu
