#include "gpu/cuda_vmm_memory.h"

namespace resurgo::gpu {

CudaVmmMemory::CudaVmmMemory(int ordinal, const CudaDriver& driver)
    : driver_(driver), context_(ordinal, driver), name_("cuda-vmm (" + context_.name() + ")") {
  const std::string& what = context_.name();
  // The destructor does not run for a constructor that throws.
  try {
    const CudaContext::Scope scope(context_);
    const CUmemAllocationProp properties = chunk_properties();
    driver_.check(driver_.cuMemGetAllocationGranularity(&granularity_, &properties, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                  "cuMemGetAllocationGranularity", what);
    driver_.check(driver_.cuStreamCreate(&capture_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", what);
    driver_.check(driver_.cuStreamCreate(&read_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate", what);
  } catch (...) {
    release();
    throw;
  }
}

CudaVmmMemory::~CudaVmmMemory() { release(); }

// Releases in reverse order and ignores errors: a destructor cannot report
// them (a throw would terminate: e.g. CUDA_ERROR_DEINITIALIZED at exit), and
// a failing driver at this point has nothing left to give back.
void CudaVmmMemory::release() noexcept {
  const CudaContext::Scope scope(context_, std::nothrow);
  for (CUstream stream : {capture_stream_, read_stream_}) {
    if (stream == nullptr) continue;
    driver_.cuStreamSynchronize(stream);
    driver_.cuStreamDestroy(stream);
  }
  for (const Chunk& chunk : chunks_) {
    driver_.cuMemUnmap(base_ + chunk.offset, chunk.bytes);
    driver_.cuMemRelease(chunk.handle);
  }
  if (base_ != 0) driver_.cuMemAddressFree(base_, size_);
}

CUmemAllocationProp CudaVmmMemory::chunk_properties() const {
  CUmemAllocationProp properties = {};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = context_.device();
  return properties;
}

void CudaVmmMemory::reserve(std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuMemAddressReserve(&base_, bytes, 0, 0, 0), "cuMemAddressReserve",
                std::to_string(bytes) + " bytes for the device cache on " + context_.name());
  size_ = bytes;
}

MapResult CudaVmmMemory::map(std::size_t offset, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  const std::string what =
      std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " of the device cache on " + context_.name();
  const CUmemAllocationProp properties = chunk_properties();
  CUmemGenericAllocationHandle handle = 0;
  const CUresult created = driver_.cuMemCreate(&handle, bytes, &properties, 0);
  if (created == CUDA_ERROR_OUT_OF_MEMORY) return MapResult::kOutOfMemory;
  driver_.check(created, "cuMemCreate", what);
  const CUresult mapped = driver_.cuMemMap(base_ + offset, bytes, 0, handle, 0);
  if (mapped != CUDA_SUCCESS) {
    driver_.cuMemRelease(handle);
    if (mapped == CUDA_ERROR_OUT_OF_MEMORY) return MapResult::kOutOfMemory;
    driver_.check(mapped, "cuMemMap", what);
  }
  chunks_.push_back({offset, bytes, handle});
  CUmemAccessDesc access = {};
  access.location = properties.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUresult allowed = driver_.cuMemSetAccess(base_ + offset, bytes, &access, 1);
  if (allowed == CUDA_ERROR_OUT_OF_MEMORY) return MapResult::kOutOfMemory;
  driver_.check(allowed, "cuMemSetAccess", what);
  return MapResult::kMapped;
}

void CudaVmmMemory::copy_in(std::size_t offset, const void* source, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  const std::string what = std::to_string(bytes) + " bytes into the device cache at offset " + std::to_string(offset);
  const auto address = reinterpret_cast<CUdeviceptr>(source);
  if (on_device(address)) {
    driver_.check(driver_.cuMemcpyDtoDAsync(base_ + offset, address, bytes, capture_stream_), "cuMemcpyDtoDAsync",
                  what);
  } else {
    driver_.check(driver_.cuMemcpyHtoDAsync(base_ + offset, source, bytes, capture_stream_), "cuMemcpyHtoDAsync",
                  what);
  }
}

// Pageable host memory is unknown to the driver: the query fails for it.
bool CudaVmmMemory::on_device(CUdeviceptr address) const {
  CUmemorytype kind = CU_MEMORYTYPE_HOST;
  return driver_.cuPointerGetAttribute(&kind, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) == CUDA_SUCCESS &&
         kind == CU_MEMORYTYPE_DEVICE;
}

void CudaVmmMemory::wait_copies_in() {
  const CudaContext::Scope scope(context_);
  driver_.check(driver_.cuStreamSynchronize(capture_stream_), "cuStreamSynchronize", "captures into the device cache");
}

void CudaVmmMemory::copy_out(std::size_t offset, void* target, std::size_t bytes) {
  const CudaContext::Scope scope(context_);
  const std::string what = std::to_string(bytes) + " bytes out of the device cache at offset " + std::to_string(offset);
  const auto address = reinterpret_cast<CUdeviceptr>(target);
  if (on_device(address)) {
    driver_.check(driver_.cuMemcpyDtoDAsync(address, base_ + offset, bytes, read_stream_), "cuMemcpyDtoDAsync", what);
  } else {
    driver_.check(driver_.cuMemcpyDtoHAsync(target, base_ + offset, bytes, read_stream_), "cuMemcpyDtoHAsync", what);
  }
  driver_.check(driver_.cuStreamSynchronize(read_stream_), "cuStreamSynchronize", what);
}

}  // namespace resurgo::gpu
