// A fake CUDA driver: libcuda.so.1 for machines without a GPU, so that the
// CUDA code in src/gpu runs in CI (plain, ASan and TSan) against a driver
// that is as strict as a real one, and that tests can make fail
// (fake_cuda_control.h). resurgo loads it as it loads the real driver:
// dlopen, then cuDriverGetVersion and cuGetProcAddress_v2, which resolves
// every other entry point by its base name.
//
// Emulated, on host memory:
// - cuInit before anything else (CUDA_ERROR_NOT_INITIALIZED); one device,
//   ordinal 0; its primary context, reference counted, current per thread
//   (cuCtxSetCurrent replaces the top of the thread's context stack,
//   cuCtxPushCurrent / cuCtxPopCurrent push and pop it).
//   Allocations, copies, streams, events, VMM calls, host registration and
//   pointer queries fail with CUDA_ERROR_INVALID_CONTEXT on a thread where
//   it is not current (or after its last release).
// - Device memory (cuMemAlloc, and cuMemCreate mapped with cuMemMap and
//   made accessible with cuMemSetAccess): a memfd, mapped at the device
//   address without access, so that the host faults on a device pointer as
//   on a GPU, and mapped once more for the fake's own copies. cuMemAlloc and
//   cuMemCreate share a device memory size (CUDA_ERROR_OUT_OF_MEMORY
//   beyond). Managed memory is host memory the driver knows; pinned host
//   memory (cuMemHostAlloc) too.
// - VMM as the driver checks it: a 2 MiB granularity; reservations, and
//   mappings into them that neither overlap nor are undone in part; an
//   address is device memory only once mapped and made accessible.
// - Copies check both sides when enqueued: device addresses must lie wholly
//   in accessible device or managed memory, host pointers outside device
//   memory, or the call returns CUDA_ERROR_INVALID_VALUE (also for a copy
//   touching reserved but unmapped memory: the driver cannot translate the
//   address). Each stream has a worker thread that runs its operations in
//   order, each a delay after it was enqueued, so that a caller that does
//   not synchronise reads stale bytes and ThreadSanitizer sees the race. A
//   copy whose memory was freed or unmapped before it ran fails on the
//   stream with CUDA_ERROR_ILLEGAL_ADDRESS, which cuStreamSynchronize then
//   returns (sticky for the stream): cuMemFree and cuMemUnmap "may"
//   synchronise, and the fake does not. cuMemcpyDtoH and cuMemcpyHtoD wait
//   for the null stream, then copy on the calling thread.
// - Host registration: overlaps, unregistering what is not a registered
//   base, unmapped memory, and a per-call size limit.
// - Error names and strings as the driver's.
//
// Not emulated: kernels, modules and graphs; several devices or contexts of
// their own; asynchrony beyond the stream workers (the null stream does not
// order other streams, so code that relies on that implicit ordering
// races here); peer access; pointer attributes other than the memory type
// and whether it is managed (CUDA_ERROR_NOT_SUPPORTED); the per-thread
// default stream (it is the null stream here).
//
// This file has the entry points; fake_cuda_books.* the driver's books and
// the control API; fake_cuda_streams.* host memory, copies and streams.
#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

#include "fake_cuda_books.h"

namespace fake_cuda {
namespace {

constexpr char kDeviceName[] = "Resurgo fake CUDA device";

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
#define FAKE_CUDA_ERROR(code, text) ErrorText{code, #code, text}
constexpr ErrorText kErrors[] = {
    FAKE_CUDA_ERROR(CUDA_SUCCESS, "no error"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    FAKE_CUDA_ERROR(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    FAKE_CUDA_ERROR(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    FAKE_CUDA_ERROR(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    FAKE_CUDA_ERROR(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered"),
    FAKE_CUDA_ERROR(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    FAKE_CUDA_ERROR(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_READY, "device not ready"),
    FAKE_CUDA_ERROR(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    FAKE_CUDA_ERROR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                    "part or all of the requested memory range is already mapped"),
    FAKE_CUDA_ERROR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
    FAKE_CUDA_ERROR(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    FAKE_CUDA_ERROR(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    FAKE_CUDA_ERROR(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef FAKE_CUDA_ERROR

const ErrorText* error_text(CUresult code) {
  for (const ErrorText& error : kErrors) {
    if (error.code == code) return &error;
  }
  return nullptr;
}

// cuGetErrorName and cuGetErrorString: one field of the error's text.
CUresult describe(CUresult error, const char* ErrorText::*field, const char** out) {
  const ErrorText* found = error_text(error);
  if (out == nullptr || found == nullptr) {
    if (out != nullptr) *out = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = found->*field;
  return CUDA_SUCCESS;
}

// Memory the host can address (managed, pinned host) of `bytes`, recorded
// as a range of `kind`: its address, or 0 when memory ran out.
std::uintptr_t insert_host_addressable(Driver& d, Range::Kind kind, std::size_t bytes) {
  std::shared_ptr<Backing> backing = Backing::anonymous(round_up(bytes, kPage));
  if (backing == nullptr) return 0;
  const auto begin = reinterpret_cast<std::uintptr_t>(backing->data());
  auto mapping = std::make_shared<Mapping>(std::move(backing), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  d.insert(Range{kind, begin, bytes, std::move(mapping), 0, {}});
  return begin;
}

}  // namespace

// The entry points cuGetProcAddress hands out, under the names <cuda.h>
// gives them (its macros add the version suffixes).
namespace entry {

CUresult cuGetErrorName(CUresult error, const char** name) {
  return call("cuGetErrorName", Needs::kNothing,
              [&](Driver&, Lock&) { return describe(error, &ErrorText::name, name); });
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  return call("cuGetErrorString", Needs::kNothing,
              [&](Driver&, Lock&) { return describe(error, &ErrorText::text, text); });
}

CUresult cuInit(unsigned int flags) {
  return call("cuInit", Needs::kNothing, [&](Driver& d, Lock&) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    d.initialized = true;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return call("cuDeviceGet", Needs::kInit, [&](Driver&, Lock&) {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  return call("cuDeviceGetName", Needs::kInit, [&](Driver&, Lock&) {
    if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, static_cast<std::size_t>(length), "%s", kDeviceName);
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  return call("cuDevicePrimaryCtxRetain", Needs::kInit, [&](Driver& d, Lock&) {
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    ++d.primary.references;
    *context = d.primary_handle();
    return CUDA_SUCCESS;
  });
}

// The last release ends the context's null stream once its work is done;
// objects still allocated stay, reported as leaks by fake_cuda_reset.
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return call("cuDevicePrimaryCtxRelease", Needs::kInit, [&](Driver& d, Lock&) {
    if (device != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (d.primary.references == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--d.primary.references == 0 && d.primary.null_stream) {
      d.primary.null_stream->retire();
      d.primary.null_stream.reset();
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxSetCurrent(CUcontext context) {
  return call("cuCtxSetCurrent", Needs::kInit, [&](Driver& d, Lock&) {
    if (context != nullptr && (context != d.primary_handle() || d.primary.references == 0)) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    current_context() = context;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxPushCurrent(CUcontext context) {
  return call("cuCtxPushCurrent", Needs::kInit, [&](Driver& d, Lock&) {
    if (context == nullptr || context != d.primary_handle() || d.primary.references == 0) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    pushed_contexts().push_back(current_context());
    current_context() = context;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxPopCurrent(CUcontext* context) {
  return call("cuCtxPopCurrent", Needs::kInit, [&](Driver&, Lock&) {
    if (current_context() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (context != nullptr) *context = current_context();
    current_context() = pushed_contexts().empty() ? nullptr : pushed_contexts().back();
    if (!pushed_contexts().empty()) pushed_contexts().pop_back();
    return CUDA_SUCCESS;
  });
}

CUresult cuMemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp* properties,
                                       CUmemAllocationGranularity_flags option) {
  return call("cuMemGetAllocationGranularity", Needs::kInit, [&](Driver&, Lock&) {
    if (const CUresult checked = check_properties(properties); checked != CUDA_SUCCESS) return checked;
    if (granularity == nullptr ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *granularity = kGranularity;
    return CUDA_SUCCESS;
  });
}

// Address space without memory: PROT_NONE, aligned to the granularity (or
// the alignment asked for); `hint` is only a hint, as for the driver.
CUresult cuMemAddressReserve(CUdeviceptr* address, std::size_t size, std::size_t alignment, CUdeviceptr hint,
                             unsigned long long flags) {
  return call("cuMemAddressReserve", Needs::kContext, [&](Driver& d, Lock&) {
    (void)hint;
    if (address == nullptr || size == 0 || size % kGranularity != 0 || flags != 0 ||
        (alignment & (alignment - 1)) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const std::size_t align = std::max(kGranularity, alignment);
    void* mapped = ::mmap(nullptr, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto start = reinterpret_cast<std::uintptr_t>(mapped);
    const std::uintptr_t begin = round_up(start, align);
    if (begin > start) ::munmap(mapped, begin - start);
    if (const std::size_t tail = start + size + align - (begin + size); tail > 0) {
      ::munmap(reinterpret_cast<void*>(begin + size), tail);
    }
    d.insert(Range{Range::Kind::kReservation, begin, size, nullptr, 0, {}});
    *address = begin;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAddressFree(CUdeviceptr address, std::size_t size) {
  return call("cuMemAddressFree", Needs::kContext, [&](Driver& d, Lock&) {
    Range* range = d.find_base(address, Range::Kind::kReservation);
    if (range == nullptr || range->size != size || !range->vmm.empty()) return CUDA_ERROR_INVALID_VALUE;
    ::munmap(reinterpret_cast<void*>(address), size);
    d.ranges.erase(address);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* properties,
                     unsigned long long flags) {
  return call("cuMemCreate", Needs::kContext, [&](Driver& d, Lock&) {
    if (const CUresult checked = check_properties(properties); checked != CUDA_SUCCESS) return checked;
    if (handle == nullptr || size == 0 || size % kGranularity != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (size > d.device_memory - std::min(d.device_memory, d.device_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::shared_ptr<Backing> backing = Backing::memfd(size);
    if (backing == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    d.physical.emplace(d.next_handle, Physical{std::move(backing)});
    d.device_bytes += size;
    *handle = d.next_handle++;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return call("cuMemRelease", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.physical.find(handle);
    if (it == d.physical.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    it->second.released = true;
    d.free_if_unused(it);
    return CUDA_SUCCESS;
  });
}

// Maps the memfd at the address, still without access: cuMemSetAccess gives it.
CUresult cuMemMap(CUdeviceptr address, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  return call("cuMemMap", Needs::kContext, [&](Driver& d, Lock&) {
    if (offset != 0 || flags != 0 || size == 0 || address % kGranularity != 0 || size % kGranularity != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto physical = d.physical.find(handle);
    if (physical == d.physical.end() || physical->second.released || size > physical->second.backing->size()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    Range* reservation = reservation_of(d, address, size);
    if (reservation == nullptr || first_overlap(reservation->vmm, address, size) != reservation->vmm.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const std::shared_ptr<Backing>& backing = physical->second.backing;
    if (::mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_SHARED | MAP_FIXED, backing->fd(), 0) ==
        MAP_FAILED) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    auto mapping = std::make_shared<Mapping>(backing, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    reservation->vmm.emplace(address, Range::Vmm{size, handle, std::move(mapping)});
    ++physical->second.mappings;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemUnmap(CUdeviceptr address, std::size_t size) {
  return call("cuMemUnmap", Needs::kContext, [&](Driver& d, Lock&) {
    Range* reservation = reservation_of(d, address, size);
    if (reservation == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto unmapped = whole_mappings(*reservation, address, size);
    if (unmapped.empty()) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& it : unmapped) {
      it->second.mapping->live.store(false, std::memory_order_relaxed);
      const auto physical = d.physical.find(it->second.handle);
      --physical->second.mappings;
      d.free_if_unused(physical);
      reservation->vmm.erase(it);
    }
    // Back to reserved address space.
    ::mmap(reinterpret_cast<void*>(address), size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
           -1, 0);
    return CUDA_SUCCESS;
  });
}

// One device: the last descriptor wins.
CUresult cuMemSetAccess(CUdeviceptr address, std::size_t size, const CUmemAccessDesc* descriptors, std::size_t count) {
  return call("cuMemSetAccess", Needs::kContext, [&](Driver& d, Lock&) {
    if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < count; ++i) {
      const CUmemAccessDesc& access = descriptors[i];
      if (access.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
      if (access.location.id != 0) return CUDA_ERROR_INVALID_DEVICE;
      if (access.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && access.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
          access.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    Range* reservation = reservation_of(d, address, size);
    if (reservation == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto mapped = whole_mappings(*reservation, address, size);
    if (mapped.empty()) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& it : mapped) it->second.mapping->access = descriptors[count - 1].flags;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAlloc(CUdeviceptr* address, std::size_t bytes) {
  return call("cuMemAlloc", Needs::kContext, [&](Driver& d, Lock&) {
    if (address == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    if (bytes > d.device_memory - std::min(d.device_memory, d.device_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::size_t view_bytes = round_up(bytes, kPage);
    std::shared_ptr<Backing> backing = Backing::memfd(view_bytes);
    if (backing == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    void* view = ::mmap(nullptr, view_bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, backing->fd(), 0);
    if (view == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto begin = reinterpret_cast<std::uintptr_t>(view);
    auto mapping = std::make_shared<Mapping>(std::move(backing), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    d.insert(Range{Range::Kind::kDevice, begin, bytes, std::move(mapping), view_bytes, {}});
    d.device_bytes += bytes;
    *address = begin;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemFree(CUdeviceptr address) {
  return call("cuMemFree", Needs::kContext, [&](Driver& d, Lock&) {
    Range* range = d.find_base(address, Range::Kind::kDevice);
    if (range == nullptr) range = d.find_base(address, Range::Kind::kManaged);
    if (range == nullptr) return CUDA_ERROR_INVALID_VALUE;
    range->mapping->live.store(false, std::memory_order_relaxed);
    if (range->kind == Range::Kind::kDevice) {
      ::munmap(reinterpret_cast<void*>(address), range->view_bytes);
      d.device_bytes -= range->size;
    }
    d.ranges.erase(address);
    return CUDA_SUCCESS;
  });
}

// Host memory the driver knows as managed; not counted as device memory
// (managed memory oversubscribes the device).
CUresult cuMemAllocManaged(CUdeviceptr* address, std::size_t bytes, unsigned int flags) {
  return call("cuMemAllocManaged", Needs::kContext, [&](Driver& d, Lock&) {
    if (address == nullptr || bytes == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const std::uintptr_t begin = insert_host_addressable(d, Range::Kind::kManaged, bytes);
    if (begin == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *address = begin;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostAlloc(void** pointer, std::size_t bytes, unsigned int flags) {
  return call("cuMemHostAlloc", Needs::kContext, [&](Driver& d, Lock&) {
    constexpr unsigned int kKnown = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uintptr_t begin = insert_host_addressable(d, Range::Kind::kPinnedHost, bytes);
    if (begin == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *pointer = reinterpret_cast<void*>(begin);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemFreeHost(void* pointer) {
  return call("cuMemFreeHost", Needs::kContext, [&](Driver& d, Lock&) {
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    Range* range = d.find_base(address, Range::Kind::kPinnedHost);
    if (range == nullptr) return CUDA_ERROR_INVALID_VALUE;
    range->mapping->live.store(false, std::memory_order_relaxed);
    d.ranges.erase(address);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostRegister(void* pointer, std::size_t bytes, unsigned int flags) {
  return call("cuMemHostRegister", Needs::kContext, [&](Driver& d, Lock&) {
    constexpr unsigned int kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (d.register_limit > 0 && bytes > d.register_limit) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
    if (const auto it = first_overlap(d.ranges, begin, bytes); it != d.ranges.end()) {
      const Range::Kind kind = it->second.kind;
      const bool pinned = kind == Range::Kind::kRegisteredHost || kind == Range::Kind::kPinnedHost;
      return pinned ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : CUDA_ERROR_INVALID_VALUE;
    }
    // The driver pins the pages: memory that is not mapped cannot be.
    const std::uintptr_t first_page = begin / kPage * kPage;
    if (::msync(reinterpret_cast<void*>(first_page), begin + bytes - first_page, MS_ASYNC) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    d.insert(Range{Range::Kind::kRegisteredHost, begin, bytes, nullptr, 0, {}});
    d.largest_registration = std::max<std::uint64_t>(d.largest_registration, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostUnregister(void* pointer) {
  return call("cuMemHostUnregister", Needs::kContext, [&](Driver& d, Lock&) {
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    if (d.find_base(address, Range::Kind::kRegisteredHost) == nullptr) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    d.ranges.erase(address);
    return CUDA_SUCCESS;
  });
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr target, CUdeviceptr source, std::size_t bytes, CUstream stream) {
  return call("cuMemcpyDtoDAsync", Needs::kContext, [&](Driver& d, Lock&) {
    std::vector<Piece> to, from;
    if (const CUresult r = d.device_pieces(target, bytes, true, to); r != CUDA_SUCCESS) return r;
    if (const CUresult r = d.device_pieces(source, bytes, false, from); r != CUDA_SUCCESS) return r;
    return d.enqueue_copy(stream, std::move(to), std::move(from), 0);
  });
}

CUresult cuMemcpyDtoHAsync(void* target, CUdeviceptr source, std::size_t bytes, CUstream stream) {
  return call("cuMemcpyDtoHAsync", Needs::kContext, [&](Driver& d, Lock&) {
    std::vector<Piece> to, from;
    if (const CUresult r = d.host_pieces(target, bytes, to); r != CUDA_SUCCESS) return r;
    if (const CUresult r = d.device_pieces(source, bytes, false, from); r != CUDA_SUCCESS) return r;
    return d.enqueue_copy(stream, std::move(to), std::move(from), 0);
  });
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr target, const void* source, std::size_t bytes, CUstream stream) {
  return call("cuMemcpyHtoDAsync", Needs::kContext, [&](Driver& d, Lock&) {
    std::vector<Piece> to, from;
    if (const CUresult r = d.device_pieces(target, bytes, true, to); r != CUDA_SUCCESS) return r;
    if (const CUresult r = d.host_pieces(source, bytes, from); r != CUDA_SUCCESS) return r;
    return d.enqueue_copy(stream, std::move(to), std::move(from), 0);
  });
}

CUresult cuMemcpyDtoH(void* target, CUdeviceptr source, std::size_t bytes) {
  return call("cuMemcpyDtoH", Needs::kContext, [&](Driver& d, Lock& lock) {
    std::vector<Piece> to, from;
    if (const CUresult r = d.host_pieces(target, bytes, to); r != CUDA_SUCCESS) return r;
    if (const CUresult r = d.device_pieces(source, bytes, false, from); r != CUDA_SUCCESS) return r;
    return copy_now(d, lock, to, from);
  });
}

CUresult cuMemcpyHtoD(CUdeviceptr target, const void* source, std::size_t bytes) {
  return call("cuMemcpyHtoD", Needs::kContext, [&](Driver& d, Lock& lock) {
    std::vector<Piece> to, from;
    if (const CUresult r = d.device_pieces(target, bytes, true, to); r != CUDA_SUCCESS) return r;
    if (const CUresult r = d.host_pieces(source, bytes, from); r != CUDA_SUCCESS) return r;
    return copy_now(d, lock, to, from);
  });
}

CUresult cuMemsetD8Async(CUdeviceptr target, unsigned char value, std::size_t count, CUstream stream) {
  return call("cuMemsetD8Async", Needs::kContext, [&](Driver& d, Lock&) {
    std::vector<Piece> to;
    if (const CUresult r = d.device_pieces(target, count, true, to); r != CUDA_SUCCESS) return r;
    return d.enqueue_copy(stream, std::move(to), {}, value);
  });
}

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  return call("cuStreamCreate", Needs::kContext, [&](Driver& d, Lock&) {
    if (stream == nullptr || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<Stream> created = Stream::start();
    *stream = reinterpret_cast<CUstream>(created.get());
    d.streams.emplace(*stream, std::move(created));
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamDestroy(CUstream stream) {
  return call("cuStreamDestroy", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.streams.find(stream);
    if (it == d.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
    it->second->retire();
    d.streams.erase(it);
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamSynchronize(CUstream stream) {
  return call("cuStreamSynchronize", Needs::kContext, [&](Driver& d, Lock& lock) {
    const std::shared_ptr<Stream> waited = d.stream(stream);
    if (waited == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    lock.unlock();
    return waited->synchronize();
  });
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  return call("cuEventCreate", Needs::kContext, [&](Driver& d, Lock&) {
    constexpr unsigned int kKnown = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (event == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    auto created = std::make_shared<Event>((flags & CU_EVENT_DISABLE_TIMING) == 0);
    *event = reinterpret_cast<CUevent>(created.get());
    d.events.emplace(*event, std::move(created));
    return CUDA_SUCCESS;
  });
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  return call("cuEventRecord", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.events.find(event);
    const std::shared_ptr<Stream> queue = d.stream(stream);
    if (it == d.events.end() || queue == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    const std::uint64_t ticket = it->second->record();
    queue->enqueue(
        [recorded = it->second, ticket] {
          recorded->reached(ticket);
          return CUDA_SUCCESS;
        },
        Clock::now() + std::chrono::microseconds(d.copy_delay_us));
    return CUDA_SUCCESS;
  });
}

CUresult cuEventSynchronize(CUevent event) {
  return call("cuEventSynchronize", Needs::kContext, [&](Driver& d, Lock& lock) {
    const auto it = d.events.find(event);
    if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    const std::shared_ptr<Event> waited = it->second;
    lock.unlock();
    waited->synchronize();
    return CUDA_SUCCESS;
  });
}

CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  return call("cuEventElapsedTime", Needs::kContext, [&](Driver& d, Lock&) {
    if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto first = d.events.find(start);
    const auto last = d.events.find(end);
    if (first == d.events.end() || last == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    Clock::time_point from, to;
    if (const CUresult r = first->second->time(from); r != CUDA_SUCCESS) return r;
    if (const CUresult r = last->second->time(to); r != CUDA_SUCCESS) return r;
    *milliseconds = std::chrono::duration<float, std::milli>(to - from).count();
    return CUDA_SUCCESS;
  });
}

CUresult cuEventDestroy(CUevent event) {
  return call("cuEventDestroy", Needs::kContext, [&](Driver& d, Lock&) {
    return d.events.erase(event) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  });
}

// Memory the driver does not know (pageable host memory) is
// CUDA_ERROR_INVALID_VALUE, as for the driver.
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  return call("cuPointerGetAttribute", Needs::kContext, [&](Driver& d, Lock&) {
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE && attribute != CU_POINTER_ATTRIBUTE_IS_MANAGED) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    const Range* range = d.find(pointer);
    if (range == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (range->kind == Range::Kind::kReservation) {
      std::vector<Piece> accessible;
      if (d.device_pieces(pointer, 1, false, accessible) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    }
    const bool host = range->kind == Range::Kind::kPinnedHost || range->kind == Range::Kind::kRegisteredHost;
    const bool managed = range->kind == Range::Kind::kManaged;
    const CUmemorytype type = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    *static_cast<unsigned int*>(data) =
        attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED ? unsigned{managed} : static_cast<unsigned int>(type);
    return CUDA_SUCCESS;
  });
}

}  // namespace entry

namespace {

struct EntryPoint {
  const char* name;
  void* function;
};

// The cast checks each definition against the prototype in <cuda.h>.
#define FAKE_CUDA_ENTRY(name) \
  EntryPoint { #name, reinterpret_cast<void*>(static_cast<decltype(&::name)>(&entry::name)) }

}  // namespace
}  // namespace fake_cuda

extern "C" {

FAKE_CUDA_EXPORT CUresult cuDriverGetVersion(int* version) {
  using namespace fake_cuda;
  return call("cuDriverGetVersion", Needs::kNothing, [&](Driver& d, Lock&) {
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = d.version;
    return CUDA_SUCCESS;
  });
}

// Every version of an entry point is the one the fake has: `cuda_version`
// and `flags` are not looked at.
FAKE_CUDA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                           CUdriverProcAddressQueryResult* status) {
  using namespace fake_cuda;
  (void)cuda_version;
  (void)flags;
  if (function != nullptr) *function = nullptr;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return call("cuGetProcAddress", Needs::kNothing, [&](Driver&, Lock&) {
    if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *function = entry_point(symbol);
    if (*function == nullptr) return CUDA_ERROR_NOT_FOUND;
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"

namespace fake_cuda {

void* entry_point(std::string_view name) {
  static const EntryPoint kEntryPoints[] = {
      {"cuDriverGetVersion", reinterpret_cast<void*>(&::cuDriverGetVersion)},
      {"cuGetProcAddress", reinterpret_cast<void*>(&::cuGetProcAddress)},
      FAKE_CUDA_ENTRY(cuGetErrorName),
      FAKE_CUDA_ENTRY(cuGetErrorString),
      FAKE_CUDA_ENTRY(cuInit),
      FAKE_CUDA_ENTRY(cuDeviceGet),
      FAKE_CUDA_ENTRY(cuDeviceGetName),
      FAKE_CUDA_ENTRY(cuDevicePrimaryCtxRetain),
      FAKE_CUDA_ENTRY(cuDevicePrimaryCtxRelease),
      FAKE_CUDA_ENTRY(cuCtxSetCurrent),
      FAKE_CUDA_ENTRY(cuCtxPushCurrent),
      FAKE_CUDA_ENTRY(cuCtxPopCurrent),
      FAKE_CUDA_ENTRY(cuMemGetAllocationGranularity),
      FAKE_CUDA_ENTRY(cuMemAddressReserve),
      FAKE_CUDA_ENTRY(cuMemAddressFree),
      FAKE_CUDA_ENTRY(cuMemCreate),
      FAKE_CUDA_ENTRY(cuMemRelease),
      FAKE_CUDA_ENTRY(cuMemMap),
      FAKE_CUDA_ENTRY(cuMemUnmap),
      FAKE_CUDA_ENTRY(cuMemSetAccess),
      FAKE_CUDA_ENTRY(cuMemAlloc),
      FAKE_CUDA_ENTRY(cuMemFree),
      FAKE_CUDA_ENTRY(cuMemAllocManaged),
      FAKE_CUDA_ENTRY(cuMemHostAlloc),
      FAKE_CUDA_ENTRY(cuMemFreeHost),
      FAKE_CUDA_ENTRY(cuMemHostRegister),
      FAKE_CUDA_ENTRY(cuMemHostUnregister),
      FAKE_CUDA_ENTRY(cuMemcpyDtoDAsync),
      FAKE_CUDA_ENTRY(cuMemcpyDtoHAsync),
      FAKE_CUDA_ENTRY(cuMemcpyHtoDAsync),
      FAKE_CUDA_ENTRY(cuMemcpyDtoH),
      FAKE_CUDA_ENTRY(cuMemcpyHtoD),
      FAKE_CUDA_ENTRY(cuMemsetD8Async),
      FAKE_CUDA_ENTRY(cuStreamCreate),
      FAKE_CUDA_ENTRY(cuStreamDestroy),
      FAKE_CUDA_ENTRY(cuStreamSynchronize),
      FAKE_CUDA_ENTRY(cuEventCreate),
      FAKE_CUDA_ENTRY(cuEventRecord),
      FAKE_CUDA_ENTRY(cuEventSynchronize),
      FAKE_CUDA_ENTRY(cuEventElapsedTime),
      FAKE_CUDA_ENTRY(cuEventDestroy),
      FAKE_CUDA_ENTRY(cuPointerGetAttribute),
  };
  for (const EntryPoint& known : kEntryPoints) {
    if (name == known.name) return known.function;
  }
  return nullptr;
}

}  // namespace fake_cuda
