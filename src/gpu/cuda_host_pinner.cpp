#include "gpu/cuda_host_pinner.h"

namespace resurgo::gpu {

CudaHostPinner::CudaHostPinner(int ordinal, const CudaDriver& driver, std::size_t max_piece)
    : driver_(driver), context_(ordinal, driver), max_piece_(max_piece) {}

void CudaHostPinner::pin(void* data, std::size_t bytes) {
  const std::string what = describe_pin_range(data, bytes) + " of the host buffer";
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuMemHostRegister(data, bytes, CU_MEMHOSTREGISTER_PORTABLE), "cuMemHostRegister", what);
}

// Errors are ignored: the range was registered by pin(), and a driver that
// fails here (device lost, shutting down) has nothing left to give back.
void CudaHostPinner::unpin(void* data, std::size_t) noexcept {
  const CudaContext::Scope scope(context_, std::nothrow);
  driver_.cuMemHostUnregister(data);
}

}  // namespace resurgo::gpu
