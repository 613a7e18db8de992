// The error thrown when a GPU operation fails: a driver call, or the driver
// itself missing. It is a StorageError because a failing driver call means
// the device level cannot hold or move the bytes it was given (out of device
// memory, device lost, no driver), which is what RSG_ESTORAGE tells callers;
// StateError means "called in the wrong order", which a driver failure is not.
#pragma once

#include <string>

#include "resurgo/errors.hpp"

namespace resurgo::gpu {

class GpuError : public StorageError {
 public:
  // `result` is the driver's CUresult (0 when no driver call failed, e.g.
  // the library could not be loaded).
  GpuError(const std::string& message, int result) : StorageError(message), result_(result) {}
  int result() const noexcept { return result_; }

 private:
  int result_;
};

}  // namespace resurgo::gpu
