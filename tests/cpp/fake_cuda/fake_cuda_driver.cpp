// A fake CUDA driver: libcuda.so.1 for machines without a GPU, so that the
// CUDA code in src/gpu runs in CI (plain, ASan and TSan) against a driver
// that is as strict as a real one, and that tests can make fail
// (fake_cuda_control.h). resurgo loads it as it loads the real driver:
// dlopen, then cuDriverGetVersion and cuGetProcAddress_v2, which resolves
// every other entry point by its base name.
//
// Emulated, on host memory:
// - cuGetProcAddress as documented: an entry point exists from the CUDA
//   version that introduced the variant the fake implements (below it:
//   CUDA_SUCCESS, no function, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT),
//   the newest variant at the version asked is the one handed out
//   (cuCtxSynchronize and cuCtxGetDevice take a context from 13000 on), and
//   a cudaVersion above the driver's or unknown flags are refused. With
//   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the entry points that take
//   a stream come in their per-thread variant (_ptsz, _ptds), whose null
//   stream is the calling thread's per-thread default stream; otherwise it
//   is the legacy one.
// - cuInit before anything else (CUDA_ERROR_NOT_INITIALIZED); 1 to 8
//   devices (fake_cuda_set_device_count), each with its own books
//   (fake_cuda_device_books: memory, copies run, context references) and
//   its primary context, reference counted, current per thread
//   (cuCtxSetCurrent replaces the top of the thread's context stack,
//   cuCtxPushCurrent / cuCtxPopCurrent push and pop it). Allocations, copies, streams, events, VMM calls, host
//   registration and pointer queries fail with CUDA_ERROR_INVALID_CONTEXT on
//   a thread where none is current (or after its last release).
// - Device memory (cuMemAlloc, and cuMemCreate mapped with cuMemMap and
//   made accessible with cuMemSetAccess): a memfd, mapped at the device
//   address without access, so that the host faults on a device pointer as
//   on a GPU, and mapped once more for the fake's own copies. cuMemAlloc and
//   cuMemCreate share each device's memory size (CUDA_ERROR_OUT_OF_MEMORY
//   beyond). Managed memory is host memory the driver knows, marked
//   do-not-fork (MADV_DONTFORK) as the driver marks it, so that a forked
//   child faults on it; pinned host memory (cuMemHostAlloc) is known too.
//   Memory remembers its device (the current
//   context's, or cuMemCreate's location), and device memory of any device
//   may be copied from any context (unified addressing).
// - VMM as the driver checks it: a 2 MiB granularity; reservations, and
//   mappings into them that neither overlap nor are undone in part; an
//   address is device memory only once mapped and made accessible, and
//   access is given per device: a copy needs it for the device that runs
//   it (the one of its stream's context).
// - Streams and events belong to the context current when they were
//   created; each context has its legacy null stream and its per-thread
//   default streams. As NVIDIA documents: a copy may go to a stream of
//   another context (CUDA Programming Guide, "Stream and Event Behavior"),
//   cuEventRecord refuses an event and a stream of different contexts
//   (CUDA_ERROR_INVALID_HANDLE), cuEventElapsedTime two events of
//   different contexts, and cuEventSynchronize takes any event. What the
//   documentation leaves open the fake refuses with
//   CUDA_ERROR_INVALID_HANDLE, so that no code comes to rely on it:
//   synchronising or destroying a stream, or destroying an event, of a
//   context that is not current.
// - Copies check both sides when enqueued: device addresses must lie wholly
//   in accessible device or managed memory, host pointers outside device
//   memory and either wholly in memory CUDA knows (registered, pinned or
//   managed) or wholly pageable (the cuMemcpy documentation), and not over
//   two registrations that lie back to back (undocumented: refused unless
//   fake_cuda_set_copies_across_registrations allows it); else
//   CUDA_ERROR_INVALID_VALUE (also for a copy touching reserved but
//   unmapped memory: the driver cannot translate the address). Each stream
//   has a worker thread that runs its operations in order, each a delay
//   after it was enqueued, so that a caller that does not synchronise reads
//   stale bytes and ThreadSanitizer sees the race. A copy whose memory was
//   freed or unmapped before it ran fails on the stream with
//   CUDA_ERROR_ILLEGAL_ADDRESS, which cuStreamSynchronize then returns
//   (sticky for the stream): cuMemFree and cuMemUnmap "may" synchronise,
//   and the fake does not.
// - Synchronous copies as NVIDIA's "API synchronization behavior" page
//   says: each waits for its null stream first; cuMemcpyDtoH, and
//   cuMemcpyHtoD from memory CUDA knows, then copy on the calling thread;
//   cuMemcpyHtoD from pageable memory returns once the bytes are staged,
//   the write to the device still on the null stream.
// - Kernels' writes to managed memory (fake_cuda_kernel_write), queued on a
//   stream and invisible to host loads until a synchronisation (of the
//   stream, of its context, or the wait a synchronous copy does on its null
//   stream) or a later operation on the same stream runs them: code that
//   reads managed memory without synchronising gets the old bytes.
// - Host registration: overlaps, unregistering what is not a registered
//   base, unmapped memory, a per-call size limit; it takes time (8 GiB/s,
//   fake_cuda_set_host_register_rate), during which the range is not
//   registered yet, and tests can hold it (fake_cuda_hold_host_register).
// - A process that forks while it holds a context: the child must never
//   call the driver (CRUM's forked checkpoints rest on it). Any call from a
//   process other than the one that called cuInit first is refused
//   (CUDA_ERROR_NOT_PERMITTED), said on stderr and counted where the parent
//   reads it (fake_cuda_forked_child_calls).
// - Error names and strings as the driver's.
//
// - Managed memory's prefetch (cuMemPrefetchAsync): checked as the driver
//   checks it, nothing moved, the location remembered per allocation
//   (fake_cuda_prefetch_location), and reported by cuMemRangeGetAttribute
//   (CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, the only range
//   attribute the fake answers).
//
// Not emulated: kernels (but for their writes to managed memory), modules and graphs; contexts other than the
// primary ones; asynchrony beyond the stream workers (neither the legacy
// null stream nor a per-thread one orders other streams, so code that
// relies on the implicit ordering of blocking streams races here); peer
// access (copies between devices just work); pointer attributes other than
// the memory type, whether it is managed and the device ordinal
// (CUDA_ERROR_NOT_SUPPORTED).
//
// This file has the entry points; fake_cuda_books.* the driver's books and
// the control API; fake_cuda_streams.* host memory, copies and streams.
#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <climits>
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

// Memory the host can address (managed, pinned host) of `bytes` for
// `device`, recorded as a range of `kind`: its address, or 0 when memory
// ran out.
std::uintptr_t insert_host_addressable(Driver& d, Range::Kind kind, std::size_t bytes, int device) {
  std::shared_ptr<Backing> backing = Backing::anonymous(round_up(bytes, kPage));
  if (backing == nullptr) return 0;
  const auto begin = reinterpret_cast<std::uintptr_t>(backing->data());
  auto mapping = std::make_shared<Mapping>(std::move(backing));
  d.insert(Range{kind, begin, bytes, device, std::move(mapping), 0, {}});
  return begin;
}

Side host_side(const void* pointer) { return {true, reinterpret_cast<std::uintptr_t>(pointer)}; }
Side device_side(CUdeviceptr address) { return {false, address}; }

// What the null stream (handle 0) is to an entry point: the legacy stream,
// or in a per-thread variant the calling thread's per-thread default stream.
template <bool kPerThread>
CUstream named(CUstream handle) {
  if (handle != nullptr) return handle;
  return kPerThread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

// cuMemcpy*Async: both sides checked now, for the device of the stream's
// context, which runs the copy.
template <bool kPerThread>
CUresult copy_async(const char* name, Side target, Side source, std::size_t bytes, CUstream handle) {
  return call(name, Needs::kContext, [&](Driver& d, Lock&) {
    const Owned<Stream> queue = d.stream(named<kPerThread>(handle));
    if (queue.object == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::vector<Piece> to, from;
    bool registered = false;
    const CUresult checked = d.copy_pieces(target, source, bytes, queue.context->device, to, from, registered);
    if (checked != CUDA_SUCCESS) return checked;
    ++d.devices[static_cast<std::size_t>(queue.context->device)].copies;
    d.launch_kernel_writes(*queue.object);
    queue.object->enqueue([to = std::move(to), from = std::move(from)] { return run_copy(to, from); }, d.due());
    return CUDA_SUCCESS;
  });
}

// Host memory that holds `bytes` of `source` as they are now: the driver's
// staging memory for a copy from pageable memory. Empty when memory ran out.
std::vector<Piece> staged(const std::vector<Piece>& source, std::size_t bytes) {
  std::shared_ptr<Backing> backing = Backing::anonymous(round_up(bytes, kPage));
  if (backing == nullptr) return {};
  auto mapping = std::make_shared<Mapping>(std::move(backing));
  std::vector<Piece> staging{{mapping->backing->data(), bytes, mapping}};
  run_copy(staging, source);
  return staging;
}

// cuMemcpyDtoH and cuMemcpyHtoD, after the work on their null stream (the
// driver syncs it first): on the calling thread, except from pageable
// memory to the device, which returns once the bytes are staged, the DMA
// to the device "may not have completed" (NVIDIA's "API synchronization
// behavior"): the write goes on the null stream, a copy delay late.
template <bool kPerThread>
CUresult copy_sync(const char* name, Side target, Side source, std::size_t bytes) {
  return call(name, Needs::kContext, [&](Driver& d, Lock& lock) {
    const std::shared_ptr<Stream> null_stream = d.stream(named<kPerThread>(nullptr)).object;
    std::vector<Piece> to, from;
    bool registered = false;
    const CUresult checked = d.copy_pieces(target, source, bytes, d.current()->device, to, from, registered);
    if (checked != CUDA_SUCCESS) return checked;
    ++d.devices[static_cast<std::size_t>(d.current()->device)].copies;
    const std::chrono::microseconds delay(d.copy_delay_us);
    d.launch_kernel_writes(*null_stream);
    lock.unlock();
    if (const CUresult pending = null_stream->synchronize(); pending != CUDA_SUCCESS) return pending;
    if (!source.host || registered || bytes == 0) return run_copy(to, from);
    std::vector<Piece> staging = staged(from, bytes);
    if (staging.empty()) return CUDA_ERROR_OUT_OF_MEMORY;
    null_stream->enqueue([to = std::move(to), staging = std::move(staging)] { return run_copy(to, staging); },
                         Clock::now() + delay);
    return CUDA_SUCCESS;
  });
}

// cuCtxSynchronize: waits for every stream of `context`, its null streams
// and those created in it; the first error one of them had.
CUresult synchronize_context(Driver& d, Lock& lock, Context& context) {
  d.launch_kernel_writes(context);
  std::vector<std::shared_ptr<Stream>> waited;
  if (context.legacy_stream) waited.push_back(context.legacy_stream);
  for (const auto& [thread, stream] : context.per_thread_streams) waited.push_back(stream);
  for (const auto& [handle, stream] : d.streams) {
    if (stream.context == &context) waited.push_back(stream.object);
  }
  lock.unlock();
  CUresult first = CUDA_SUCCESS;
  for (const std::shared_ptr<Stream>& stream : waited) {
    const CUresult result = stream->synchronize();
    if (first == CUDA_SUCCESS) first = result;
  }
  return first;
}

// cuCtxGetDevice: the device of `handle`, the current context when null.
CUresult context_device(Driver& d, CUcontext handle, CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Context* context = handle == nullptr ? d.current() : d.context(handle);
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = context->device;
  return CUDA_SUCCESS;
}

// The documentation does not say whether a stream or an event may be used
// while another context is current (it says so of copies and of event
// records, see below): the fake refuses it, so that no code relies on it.
template <class Object>
bool of_current(Driver& d, const Owned<Object>& owned) {
  return owned.context == d.current();
}

// How long cuMemHostRegister takes to pin `bytes` (0: instant).
Clock::duration registration_time(std::uint64_t bytes, std::uint64_t bytes_per_second) {
  if (bytes_per_second == 0) return {};
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / static_cast<double>(bytes_per_second)));
}

}  // namespace

// The entry points cuGetProcAddress hands out, under the names <cuda.h>
// gives them (its macros add the version suffixes). Those that take a
// stream are templates: kPerThread makes the per-thread variant.
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
  set_driver_process();
  return call("cuInit", Needs::kNothing, [&](Driver& d, Lock&) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    d.initialized = true;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetCount(int* count) {
  return call("cuDeviceGetCount", Needs::kInit, [&](Driver& d, Lock&) {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = d.device_count;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return call("cuDeviceGet", Needs::kInit, [&](Driver& d, Lock&) {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!d.valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  return call("cuDeviceGetName", Needs::kInit, [&](Driver& d, Lock&) {
    if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!d.valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, static_cast<std::size_t>(length), "%s %d", kDeviceName, device);
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  return call("cuDevicePrimaryCtxRetain", Needs::kInit, [&](Driver& d, Lock&) {
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!d.valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
    Context& primary = d.devices[device].primary;
    ++primary.references;
    *context = primary.handle();
    return CUDA_SUCCESS;
  });
}

// The last release ends the context's null streams once their work is
// done; objects still allocated stay, reported as leaks by fake_cuda_reset.
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  return call("cuDevicePrimaryCtxRelease", Needs::kInit, [&](Driver& d, Lock&) {
    if (!d.valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
    Context& primary = d.devices[device].primary;
    if (primary.references == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--primary.references == 0) primary.retire_streams();
    return CUDA_SUCCESS;
  });
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  return call("cuDevicePrimaryCtxGetState", Needs::kInit, [&](Driver& d, Lock&) {
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!d.valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = d.devices[device].primary.references > 0 ? 1 : 0;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxSetCurrent(CUcontext context) {
  return call("cuCtxSetCurrent", Needs::kInit, [&](Driver& d, Lock&) {
    if (context != nullptr && d.context(context) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    current_context() = context;
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  return call("cuCtxGetCurrent", Needs::kInit, [&](Driver&, Lock&) {
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *context = current_context();
    return CUDA_SUCCESS;
  });
}

CUresult cuCtxPushCurrent(CUcontext context) {
  return call("cuCtxPushCurrent", Needs::kInit, [&](Driver& d, Lock&) {
    if (d.context(context) == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
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

CUresult cuCtxGetDevice(CUdevice* device) {
  return call("cuCtxGetDevice", Needs::kInit,
              [&](Driver& d, Lock&) { return context_device(d, nullptr, device); });
}

CUresult cuCtxSynchronize() {
  return call("cuCtxSynchronize", Needs::kContext,
              [&](Driver& d, Lock& lock) { return synchronize_context(d, lock, *d.current()); });
}

#if CUDA_VERSION >= 13000
// The CUDA 13 variants, which cuGetProcAddress hands out for a cudaVersion
// of 13000 and more: a context argument, null for the current one.
CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext context) {
  return call("cuCtxGetDevice", Needs::kInit,
              [&](Driver& d, Lock&) { return context_device(d, context, device); });
}

CUresult cuCtxSynchronize_v2(CUcontext handle) {
  return call("cuCtxSynchronize", Needs::kInit, [&](Driver& d, Lock& lock) {
    Context* context = handle == nullptr ? d.current() : d.context(handle);
    if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    return synchronize_context(d, lock, *context);
  });
}
#endif

CUresult cuMemGetAllocationGranularity(std::size_t* granularity, const CUmemAllocationProp* properties,
                                       CUmemAllocationGranularity_flags option) {
  return call("cuMemGetAllocationGranularity", Needs::kInit, [&](Driver& d, Lock&) {
    if (const CUresult checked = check_properties(d, properties); checked != CUDA_SUCCESS) return checked;
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
    d.insert(Range{Range::Kind::kReservation, begin, size, 0, nullptr, 0, {}});
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

// Physical memory of the device the properties name.
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* properties,
                     unsigned long long flags) {
  return call("cuMemCreate", Needs::kContext, [&](Driver& d, Lock&) {
    if (const CUresult checked = check_properties(d, properties); checked != CUDA_SUCCESS) return checked;
    if (handle == nullptr || size == 0 || size % kGranularity != 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    const int device = properties->location.id;
    if (!d.has_room(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    std::shared_ptr<Backing> backing = Backing::memfd(size);
    if (backing == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    d.physical.emplace(d.next_handle, Physical{std::move(backing), device});
    d.devices[device].allocated += size;
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
    auto mapping = std::make_shared<Mapping>(backing);
    reservation->vmm.emplace(address, Range::Vmm{size, handle, std::move(mapping), physical->second.device});
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

// Access per device: a later descriptor for the same device wins.
CUresult cuMemSetAccess(CUdeviceptr address, std::size_t size, const CUmemAccessDesc* descriptors, std::size_t count) {
  return call("cuMemSetAccess", Needs::kContext, [&](Driver& d, Lock&) {
    if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < count; ++i) {
      const CUmemAccessDesc& access = descriptors[i];
      if (access.location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
      if (!d.valid_device(access.location.id)) return CUDA_ERROR_INVALID_DEVICE;
      if (access.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && access.flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
          access.flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    Range* reservation = reservation_of(d, address, size);
    if (reservation == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto mapped = whole_mappings(*reservation, address, size);
    if (mapped.empty()) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& it : mapped) {
      for (std::size_t i = 0; i < count; ++i) it->second.access[descriptors[i].location.id] = descriptors[i].flags;
    }
    return CUDA_SUCCESS;
  });
}

CUresult cuMemAlloc(CUdeviceptr* address, std::size_t bytes) {
  return call("cuMemAlloc", Needs::kContext, [&](Driver& d, Lock&) {
    if (address == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    const int device = d.current()->device;
    if (!d.has_room(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::size_t view_bytes = round_up(bytes, kPage);
    std::shared_ptr<Backing> backing = Backing::memfd(view_bytes);
    if (backing == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    void* view = ::mmap(nullptr, view_bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, backing->fd(), 0);
    if (view == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto begin = reinterpret_cast<std::uintptr_t>(view);
    auto mapping = std::make_shared<Mapping>(std::move(backing));
    d.insert(Range{Range::Kind::kDevice, begin, bytes, device, std::move(mapping), view_bytes, {}});
    d.devices[device].allocated += bytes;
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
      d.devices[range->device].allocated -= range->size;
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
    const std::uintptr_t begin = insert_host_addressable(d, Range::Kind::kManaged, bytes, d.current()->device);
    if (begin == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    ::madvise(reinterpret_cast<void*>(begin), round_up(bytes, kPage), MADV_DONTFORK);
    *address = begin;
    return CUDA_SUCCESS;
  });
}

CUresult cuMemHostAlloc(void** pointer, std::size_t bytes, unsigned int flags) {
  return call("cuMemHostAlloc", Needs::kContext, [&](Driver& d, Lock&) {
    constexpr unsigned int kKnown = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uintptr_t begin = insert_host_addressable(d, Range::Kind::kPinnedHost, bytes, d.current()->device);
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

// Pinning takes time, spent without the driver's mutex: until the call
// returns the range is not registered (a copy into it is a pageable copy),
// though a second registration overlapping it fails.
CUresult cuMemHostRegister(void* pointer, std::size_t bytes, unsigned int flags) {
  return call("cuMemHostRegister", Needs::kContext, [&](Driver& d, Lock& lock) {
    constexpr unsigned int kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (d.register_limit > 0 && bytes > d.register_limit) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
    if (first_overlap(d.registering, begin, bytes) != d.registering.end()) {
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
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
    const int device = d.current()->device;
    d.registering.emplace(begin, Range{Range::Kind::kRegisteredHost, begin, bytes, device, nullptr, 0, {}});
    d.wait_if_held(lock);
    const Clock::duration pinning = registration_time(bytes, d.register_rate);
    lock.unlock();
    std::this_thread::sleep_for(pinning);
    lock.lock();
    d.insert(std::move(d.registering.extract(begin).mapped()));
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

template <bool kPerThread>
CUresult cuMemcpyDtoDAsync(CUdeviceptr target, CUdeviceptr source, std::size_t bytes, CUstream stream) {
  return copy_async<kPerThread>("cuMemcpyDtoDAsync", device_side(target), device_side(source), bytes, stream);
}

template <bool kPerThread>
CUresult cuMemcpyDtoHAsync(void* target, CUdeviceptr source, std::size_t bytes, CUstream stream) {
  return copy_async<kPerThread>("cuMemcpyDtoHAsync", host_side(target), device_side(source), bytes, stream);
}

template <bool kPerThread>
CUresult cuMemcpyHtoDAsync(CUdeviceptr target, const void* source, std::size_t bytes, CUstream stream) {
  return copy_async<kPerThread>("cuMemcpyHtoDAsync", device_side(target), host_side(source), bytes, stream);
}

template <bool kPerThread>
CUresult cuMemcpyDtoH(void* target, CUdeviceptr source, std::size_t bytes) {
  return copy_sync<kPerThread>("cuMemcpyDtoH", host_side(target), device_side(source), bytes);
}

template <bool kPerThread>
CUresult cuMemcpyHtoD(CUdeviceptr target, const void* source, std::size_t bytes) {
  return copy_sync<kPerThread>("cuMemcpyHtoD", device_side(target), host_side(source), bytes);
}

template <bool kPerThread>
CUresult cuMemsetD8Async(CUdeviceptr target, unsigned char value, std::size_t count, CUstream stream) {
  return call("cuMemsetD8Async", Needs::kContext, [&](Driver& d, Lock&) {
    const Owned<Stream> queue = d.stream(named<kPerThread>(stream));
    if (queue.object == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    std::vector<Piece> to;
    if (const CUresult r = d.device_pieces(target, count, true, queue.context->device, to); r != CUDA_SUCCESS) {
      return r;
    }
    ++d.devices[static_cast<std::size_t>(queue.context->device)].copies;
    d.launch_kernel_writes(*queue.object);
    queue.object->enqueue([to = std::move(to), value] { return run_copy(to, {}, value); }, d.due());
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  return call("cuStreamCreate", Needs::kContext, [&](Driver& d, Lock&) {
    if (stream == nullptr || (flags != CU_STREAM_DEFAULT && flags != CU_STREAM_NON_BLOCKING)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::shared_ptr<Stream> created = Stream::start();
    *stream = reinterpret_cast<CUstream>(created.get());
    d.streams.emplace(*stream, Owned<Stream>{std::move(created), d.current()});
    return CUDA_SUCCESS;
  });
}

CUresult cuStreamDestroy(CUstream stream) {
  return call("cuStreamDestroy", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.streams.find(stream);
    if (it == d.streams.end() || !of_current(d, it->second)) return CUDA_ERROR_INVALID_HANDLE;
    d.launch_kernel_writes(*it->second.object);  // its work still runs
    it->second.object->retire();
    d.streams.erase(it);
    return CUDA_SUCCESS;
  });
}

template <bool kPerThread>
CUresult cuStreamSynchronize(CUstream stream) {
  return call("cuStreamSynchronize", Needs::kContext, [&](Driver& d, Lock& lock) {
    const Owned<Stream> waited = d.stream(named<kPerThread>(stream));
    if (waited.object == nullptr || !of_current(d, waited)) return CUDA_ERROR_INVALID_HANDLE;
    d.launch_kernel_writes(*waited.object);
    lock.unlock();
    return waited.object->synchronize();
  });
}

CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  return call("cuEventCreate", Needs::kContext, [&](Driver& d, Lock&) {
    constexpr unsigned int kKnown = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (event == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    auto created = std::make_shared<Event>((flags & CU_EVENT_DISABLE_TIMING) == 0);
    *event = reinterpret_cast<CUevent>(created.get());
    d.events.emplace(*event, Owned<Event>{std::move(created), d.current()});
    return CUDA_SUCCESS;
  });
}

// "hEvent and hStream must be from the same context otherwise
// CUDA_ERROR_INVALID_HANDLE is returned" (cuEventRecord); the current
// context may be another.
template <bool kPerThread>
CUresult cuEventRecord(CUevent event, CUstream stream) {
  return call("cuEventRecord", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.events.find(event);
    const Owned<Stream> queue = d.stream(named<kPerThread>(stream));
    if (it == d.events.end() || queue.object == nullptr || it->second.context != queue.context) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    d.launch_kernel_writes(*queue.object);
    const std::uint64_t ticket = it->second.object->record();
    queue.object->enqueue(
        [recorded = it->second.object, ticket] {
          recorded->reached(ticket);
          return CUDA_SUCCESS;
        },
        d.due());
    return CUDA_SUCCESS;
  });
}

// Any context's event: "cudaEventSynchronize() [...] will succeed even if
// the input event is associated to a device that is different from the
// current device" (CUDA Programming Guide).
CUresult cuEventSynchronize(CUevent event) {
  return call("cuEventSynchronize", Needs::kContext, [&](Driver& d, Lock& lock) {
    const auto it = d.events.find(event);
    if (it == d.events.end()) return CUDA_ERROR_INVALID_HANDLE;
    const std::shared_ptr<Event> waited = it->second.object;
    lock.unlock();
    waited->synchronize();
    return CUDA_SUCCESS;
  });
}

// "cudaEventElapsedTime() will fail if the two input events are associated
// to different devices" (CUDA Programming Guide).
CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  return call("cuEventElapsedTime", Needs::kContext, [&](Driver& d, Lock&) {
    if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const auto first = d.events.find(start);
    const auto last = d.events.find(end);
    if (first == d.events.end() || last == d.events.end() || first->second.context != last->second.context) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    Clock::time_point from, to;
    if (const CUresult r = first->second.object->time(from); r != CUDA_SUCCESS) return r;
    if (const CUresult r = last->second.object->time(to); r != CUDA_SUCCESS) return r;
    *milliseconds = std::chrono::duration<float, std::milli>(to - from).count();
    return CUDA_SUCCESS;
  });
}

CUresult cuEventDestroy(CUevent event) {
  return call("cuEventDestroy", Needs::kContext, [&](Driver& d, Lock&) {
    const auto it = d.events.find(event);
    if (it == d.events.end() || !of_current(d, it->second)) return CUDA_ERROR_INVALID_HANDLE;
    d.events.erase(it);
    return CUDA_SUCCESS;
  });
}

// Managed memory's prefetch: the fake has host memory only and moves
// nothing, but checks the range (all of it in one managed allocation), the
// location (a device there is, or the CPU) and the stream, as the driver
// does, and remembers the location (fake_cuda_prefetch_location).
template <bool kPerThread>
CUresult prefetch(CUdeviceptr address, std::size_t bytes, int location, CUstream handle) {
  return call("cuMemPrefetchAsync", Needs::kContext, [&](Driver& d, Lock&) {
    Range* range = d.find(address);
    if (range == nullptr || range->kind != Range::Kind::kManaged || bytes == 0 ||
        address - range->begin + bytes > range->size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (location != CU_DEVICE_CPU && !d.valid_device(location)) return CUDA_ERROR_INVALID_DEVICE;
    if (d.stream(named<kPerThread>(handle)).object == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    range->prefetched_to = location;
    return CUDA_SUCCESS;
  });
}

#if CUDA_VERSION >= 13000
// cuMemPrefetchAsync_v2 (CUDA 12.2), which <cuda.h> names cuMemPrefetchAsync
// from CUDA 13 on: a CUmemLocation, a device or the host.
template <bool kPerThread>
CUresult cuMemPrefetchAsync(CUdeviceptr address, std::size_t bytes, CUmemLocation location, unsigned int flags,
                            CUstream stream) {
  const bool known = location.type == CU_MEM_LOCATION_TYPE_DEVICE || location.type == CU_MEM_LOCATION_TYPE_HOST;
  const int where = !known || flags != 0                       ? INT_MIN  // no device: refused
                    : location.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU
                                                                 : location.id;
  return prefetch<kPerThread>(address, bytes, where, stream);
}
#else
template <bool kPerThread>
CUresult cuMemPrefetchAsync(CUdeviceptr address, std::size_t bytes, CUdevice device, CUstream stream) {
  return prefetch<kPerThread>(address, bytes, device, stream);
}
#endif

// Memory the driver does not know (pageable host memory) is
// CUDA_ERROR_INVALID_VALUE, as for the driver; so is a reservation where it
// is not mapped and accessible to the current context's device.
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  return call("cuPointerGetAttribute", Needs::kContext, [&](Driver& d, Lock&) {
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE && attribute != CU_POINTER_ATTRIBUTE_IS_MANAGED &&
        attribute != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    Range* range = d.find(pointer);
    if (range == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int device = range->device;
    if (range->kind == Range::Kind::kReservation) {
      std::vector<Piece> accessible;
      if (d.device_pieces(pointer, 1, false, d.current()->device, accessible) != CUDA_SUCCESS) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      device = mapping_at(*range, pointer)->second.device;
    }
    const bool host = range->kind == Range::Kind::kPinnedHost || range->kind == Range::Kind::kRegisteredHost;
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned int*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<unsigned int*>(data) = range->kind == Range::Kind::kManaged ? 1 : 0;
        break;
      default:
        *static_cast<int*>(data) = device;
        break;
    }
    return CUDA_SUCCESS;
  });
}

// Of the range attributes, the last prefetch location alone, as the driver
// answers it: a device ordinal, CU_DEVICE_CPU, or CU_DEVICE_INVALID before
// any prefetch; the fake keeps one location per allocation (the last
// prefetch of any part of it), not one per page. A range not wholly in one
// managed allocation, or a size other than 4, is CUDA_ERROR_INVALID_VALUE.
CUresult cuMemRangeGetAttribute(void* data, std::size_t data_size, CUmem_range_attribute attribute,
                                CUdeviceptr address, std::size_t count) {
  return call("cuMemRangeGetAttribute", Needs::kContext, [&](Driver& d, Lock&) {
    if (attribute != CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION) return CUDA_ERROR_NOT_SUPPORTED;
    const Range* range = d.find(address);
    if (data == nullptr || data_size != sizeof(int) || range == nullptr || range->kind != Range::Kind::kManaged ||
        count == 0 || address - range->begin + count > range->size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *static_cast<int*>(data) = range->prefetched_to;
    return CUDA_SUCCESS;
  });
}

}  // namespace entry

namespace {

// One variant of an entry point.
struct Variant {
  const char* name;  // the base name cuGetProcAddress is asked for
  // The CUDA version that introduced this variant's ABI, as cudaTypedefs.h
  // names its PFN_<name>_v<version> (the _v2 of cuMemAlloc, for example,
  // 3020): cuGetProcAddress hands it out from that cudaVersion on.
  int since;
  bool per_thread;  // a _ptsz/_ptds variant: the null stream is the per-thread one
  void* function;
};

// The cast checks each definition against the prototype in <cuda.h>.
#define FAKE_CUDA_VARIANT(name, prototype, since, per_thread, function) \
  Variant { name, since, per_thread, reinterpret_cast<void*>(static_cast<decltype(&::prototype)>(&function)) }
#define FAKE_CUDA_ENTRY(name, since) FAKE_CUDA_VARIANT(#name, name, since, false, entry::name)
// An entry point that takes a stream: its legacy variant, and the
// per-thread one (CUDA 7.0).
#define FAKE_CUDA_STREAM_ENTRY(name, since)                           \
  FAKE_CUDA_VARIANT(#name, name, since, false, entry::name<false>), \
      FAKE_CUDA_VARIANT(#name, name, 7000, true, entry::name<true>)

// <cuda.h> gives cuEventElapsedTime the prototype of cuEventElapsedTime_v2
// from CUDA 12.8 on.
constexpr int kEventElapsedTimeSince = CUDA_VERSION >= 12080 ? 12080 : 2000;
// And cuMemPrefetchAsync that of cuMemPrefetchAsync_v2 from CUDA 13 on.
constexpr int kMemPrefetchSince = CUDA_VERSION >= 13000 ? 12020 : 8000;

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

// As documented: a cudaVersion above the driver's, or flags other than the
// three, CUDA_ERROR_INVALID_VALUE; an entry point newer than cudaVersion
// CUDA_SUCCESS without a function. A name the fake lacks is
// CUDA_ERROR_NOT_FOUND.
FAKE_CUDA_EXPORT CUresult cuGetProcAddress(const char* symbol, void** function, int cuda_version, cuuint64_t flags,
                                           CUdriverProcAddressQueryResult* status) {
  using namespace fake_cuda;
  if (function != nullptr) *function = nullptr;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return call("cuGetProcAddress", Needs::kNothing, [&](Driver& d, Lock&) {
    if (symbol == nullptr || function == nullptr || cuda_version > d.version) return CUDA_ERROR_INVALID_VALUE;
    if (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
        flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const Found found = entry_point(symbol, cuda_version, flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    if (!found.known) return CUDA_ERROR_NOT_FOUND;
    if (found.function == nullptr) {
      if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_SUCCESS;
    }
    *function = found.function;
    ++d.resolutions[{symbol, flags}];
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  });
}

}  // extern "C"

namespace fake_cuda {

Found entry_point(std::string_view name, int cuda_version, bool per_thread) {
  static const Variant kVariants[] = {
      {"cuDriverGetVersion", 2020, false, reinterpret_cast<void*>(&::cuDriverGetVersion)},
      {"cuGetProcAddress", 12000, false, reinterpret_cast<void*>(&::cuGetProcAddress)},
      FAKE_CUDA_ENTRY(cuGetErrorName, 6000),
      FAKE_CUDA_ENTRY(cuGetErrorString, 6000),
      FAKE_CUDA_ENTRY(cuInit, 2000),
      FAKE_CUDA_ENTRY(cuDeviceGetCount, 2000),
      FAKE_CUDA_ENTRY(cuDeviceGet, 2000),
      FAKE_CUDA_ENTRY(cuDeviceGetName, 2000),
      FAKE_CUDA_ENTRY(cuDevicePrimaryCtxRetain, 7000),
      FAKE_CUDA_ENTRY(cuDevicePrimaryCtxRelease, 11000),
      FAKE_CUDA_ENTRY(cuDevicePrimaryCtxGetState, 7000),
      FAKE_CUDA_ENTRY(cuCtxSetCurrent, 4000),
      FAKE_CUDA_ENTRY(cuCtxGetCurrent, 4000),
      FAKE_CUDA_ENTRY(cuCtxPushCurrent, 4000),
      FAKE_CUDA_ENTRY(cuCtxPopCurrent, 4000),
      FAKE_CUDA_ENTRY(cuCtxGetDevice, 2000),
      FAKE_CUDA_ENTRY(cuCtxSynchronize, 2000),
#if CUDA_VERSION >= 13000
      FAKE_CUDA_VARIANT("cuCtxGetDevice", cuCtxGetDevice_v2, 13000, false, entry::cuCtxGetDevice_v2),
      FAKE_CUDA_VARIANT("cuCtxSynchronize", cuCtxSynchronize_v2, 13000, false, entry::cuCtxSynchronize_v2),
#endif
      FAKE_CUDA_ENTRY(cuMemGetAllocationGranularity, 10020),
      FAKE_CUDA_ENTRY(cuMemAddressReserve, 10020),
      FAKE_CUDA_ENTRY(cuMemAddressFree, 10020),
      FAKE_CUDA_ENTRY(cuMemCreate, 10020),
      FAKE_CUDA_ENTRY(cuMemRelease, 10020),
      FAKE_CUDA_ENTRY(cuMemMap, 10020),
      FAKE_CUDA_ENTRY(cuMemUnmap, 10020),
      FAKE_CUDA_ENTRY(cuMemSetAccess, 10020),
      FAKE_CUDA_ENTRY(cuMemAlloc, 3020),
      FAKE_CUDA_ENTRY(cuMemFree, 3020),
      FAKE_CUDA_ENTRY(cuMemAllocManaged, 6000),
      FAKE_CUDA_ENTRY(cuMemHostAlloc, 2020),
      FAKE_CUDA_ENTRY(cuMemFreeHost, 2000),
      FAKE_CUDA_ENTRY(cuMemHostRegister, 6050),
      FAKE_CUDA_ENTRY(cuMemHostUnregister, 4000),
      FAKE_CUDA_STREAM_ENTRY(cuMemcpyDtoDAsync, 3020),
      FAKE_CUDA_STREAM_ENTRY(cuMemcpyDtoHAsync, 3020),
      FAKE_CUDA_STREAM_ENTRY(cuMemcpyHtoDAsync, 3020),
      FAKE_CUDA_STREAM_ENTRY(cuMemcpyDtoH, 3020),
      FAKE_CUDA_STREAM_ENTRY(cuMemcpyHtoD, 3020),
      FAKE_CUDA_STREAM_ENTRY(cuMemsetD8Async, 3020),
      // Its per-thread variant is as new as it: no older prototype is handed out.
      FAKE_CUDA_VARIANT("cuMemPrefetchAsync", cuMemPrefetchAsync, kMemPrefetchSince, false,
                        entry::cuMemPrefetchAsync<false>),
      FAKE_CUDA_VARIANT("cuMemPrefetchAsync", cuMemPrefetchAsync, kMemPrefetchSince, true,
                        entry::cuMemPrefetchAsync<true>),
      FAKE_CUDA_ENTRY(cuStreamCreate, 2000),
      FAKE_CUDA_ENTRY(cuStreamDestroy, 4000),
      FAKE_CUDA_STREAM_ENTRY(cuStreamSynchronize, 2000),
      FAKE_CUDA_ENTRY(cuEventCreate, 2000),
      FAKE_CUDA_STREAM_ENTRY(cuEventRecord, 2000),
      FAKE_CUDA_ENTRY(cuEventSynchronize, 2000),
      FAKE_CUDA_ENTRY(cuEventElapsedTime, kEventElapsedTimeSince),
      FAKE_CUDA_ENTRY(cuEventDestroy, 4000),
      FAKE_CUDA_ENTRY(cuPointerGetAttribute, 4000),
      FAKE_CUDA_ENTRY(cuMemRangeGetAttribute, 8000),
  };
  // The newest variant at `cuda_version`, a per-thread one first if asked
  // for ("If a per-thread version is not found, the API will return the
  // legacy version").
  Found found{false, nullptr};
  const Variant* best = nullptr;
  for (const Variant& variant : kVariants) {
    if (name != variant.name) continue;
    found.known = true;
    if (variant.since > cuda_version || (variant.per_thread && !per_thread)) continue;
    if (best == nullptr || std::pair(variant.per_thread, variant.since) > std::pair(best->per_thread, best->since)) {
      best = &variant;
    }
  }
  if (best != nullptr) found.function = best->function;
  return found;
}

}  // namespace fake_cuda
