#include "fake_cuda_books.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace fake_cuda {

namespace {

// A misuse the driver cannot report through a return value: the test dies
// loudly rather than the fake's books going wrong.
[[noreturn]] void fatal(const char* what, std::uintptr_t address) {
  std::fprintf(stderr, "fake CUDA driver: %s (at 0x%jx)\n", what, static_cast<std::uintmax_t>(address));
  std::abort();
}

}  // namespace

Driver& driver() {
  static Driver* const instance = new Driver();
  return *instance;
}

CUcontext& current_context() {
  thread_local CUcontext context = nullptr;
  return context;
}

std::vector<CUcontext>& pushed_contexts() {
  thread_local std::vector<CUcontext> contexts;
  return contexts;
}

CUresult Driver::admit(const char* name, Needs needs) {
  ++calls[name];
  if (const auto rule = rules.find(name); rule != rules.end()) {
    Rule& r = rule->second;
    if (r.passed < r.after) {
      ++r.passed;
    } else {
      const CUresult result = r.result;
      if (r.times > 0 && --r.times == 0) rules.erase(rule);
      return result;
    }
  }
  if (needs != Needs::kNothing && !initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (needs == Needs::kContext && (current_context() != primary_handle() || primary.references == 0)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

Range* Driver::find(std::uintptr_t address) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return nullptr;
  --it;
  return address - it->first < it->second.size ? &it->second : nullptr;
}

// The range of `kind` that starts at `address`: what a free or unregister names.
Range* Driver::find_base(std::uintptr_t address, Range::Kind kind) {
  const auto it = ranges.find(address);
  return it != ranges.end() && it->second.kind == kind ? &it->second : nullptr;
}

// New ranges come from mmap, which never overlaps a live mapping; an overlap
// means registered host memory was unmapped without cuMemHostUnregister.
void Driver::insert(Range range) {
  if (first_overlap(ranges, range.begin, range.size) != ranges.end()) {
    fatal("host memory registered with cuMemHostRegister was unmapped while registered", range.begin);
  }
  ranges.emplace(range.begin, std::move(range));
}

CUresult Driver::device_pieces(CUdeviceptr address, std::size_t bytes, bool write, std::vector<Piece>& pieces) {
  if (bytes == 0) return CUDA_SUCCESS;
  Range* range = find(address);
  if (range == nullptr || address + bytes < address) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t offset = address - range->begin;
  if (range->kind == Range::Kind::kDevice || range->kind == Range::Kind::kManaged) {
    if (bytes > range->size - offset) return CUDA_ERROR_INVALID_VALUE;
    pieces.push_back({range->mapping->backing->data() + offset, bytes, range->mapping});
    return CUDA_SUCCESS;
  }
  if (range->kind != Range::Kind::kReservation) return CUDA_ERROR_INVALID_VALUE;  // host memory
  // A copy may span mappings that lie back to back, each accessible.
  const CUmemAccess_flags needed = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
  for (std::uintptr_t at = address, end = address + bytes; at < end;) {
    auto it = range->vmm.upper_bound(at);
    if (it == range->vmm.begin()) return CUDA_ERROR_INVALID_VALUE;
    const Range::Vmm& vmm = (--it)->second;
    const std::size_t into = at - it->first;
    if (into >= vmm.size || (vmm.mapping->access & needed) != needed) return CUDA_ERROR_INVALID_VALUE;
    const std::size_t piece = std::min<std::size_t>(end - at, vmm.size - into);
    pieces.push_back({vmm.mapping->backing->data() + into, piece, vmm.mapping});
    at += piece;
  }
  return CUDA_SUCCESS;
}

CUresult Driver::host_pieces(const void* host, std::size_t bytes, std::vector<Piece>& pieces) {
  if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  const auto begin = reinterpret_cast<std::uintptr_t>(host);
  for (auto it = first_overlap(ranges, begin, bytes); it != ranges.end() && it->first < begin + bytes; ++it) {
    const Range::Kind kind = it->second.kind;
    if (kind == Range::Kind::kDevice || kind == Range::Kind::kReservation) return CUDA_ERROR_INVALID_VALUE;
  }
  // Pinned or managed memory is kept while the copy waits; pageable memory is the caller's.
  const Range* range = find(begin);
  pieces.push_back({static_cast<std::byte*>(const_cast<void*>(host)), bytes, range ? range->mapping : nullptr});
  return CUDA_SUCCESS;
}

// The null stream (and CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) is the
// primary context's; null for an unknown handle.
std::shared_ptr<Stream> Driver::stream(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    if (!primary.null_stream) primary.null_stream = Stream::start();
    return primary.null_stream;
  }
  const auto it = streams.find(handle);
  return it == streams.end() ? nullptr : it->second;
}

CUresult Driver::enqueue_copy(CUstream handle, std::vector<Piece> target, std::vector<Piece> source,
                              unsigned char fill) {
  const std::shared_ptr<Stream> queue = stream(handle);
  if (queue == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  queue->enqueue([target = std::move(target), source = std::move(source),
                  fill] { return run_copy(target, source, fill); },
                 Clock::now() + std::chrono::microseconds(copy_delay_us));
  return CUDA_SUCCESS;
}

void Driver::free_if_unused(std::map<CUmemGenericAllocationHandle, Physical>::iterator it) {
  if (!it->second.released || it->second.mappings > 0) return;
  device_bytes -= it->second.backing->size();
  physical.erase(it);
}

FakeCudaCounters Driver::counters() {
  FakeCudaCounters result = {};
  result.device_bytes = device_bytes;
  for (const auto& [begin, range] : ranges) {
    switch (range.kind) {
      case Range::Kind::kDevice: ++result.device_allocations; break;
      case Range::Kind::kManaged: ++result.managed_allocations; break;
      case Range::Kind::kPinnedHost: ++result.host_allocations; break;
      case Range::Kind::kRegisteredHost:
        ++result.registered_ranges;
        result.registered_bytes += range.size;
        break;
      case Range::Kind::kReservation:
        ++result.reservations;
        result.mappings += range.vmm.size();
        break;
    }
  }
  result.physical_allocations = physical.size();
  result.streams = streams.size();
  result.events = events.size();
  result.context_references = static_cast<std::uint64_t>(primary.references);
  result.largest_registration = largest_registration;
  result.async_failures = async_failures.load(std::memory_order_relaxed);
  return result;
}

CUresult check_properties(const CUmemAllocationProp* properties) {
  if (properties == nullptr || properties->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      properties->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return properties->location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

std::vector<std::map<std::uintptr_t, Range::Vmm>::iterator> whole_mappings(Range& reservation, std::uintptr_t address,
                                                                           std::size_t bytes) {
  std::vector<std::map<std::uintptr_t, Range::Vmm>::iterator> found;
  const std::uintptr_t end = address + bytes;
  std::uintptr_t at = address;
  for (auto it = reservation.vmm.find(address); at < end; ++it) {
    if (it == reservation.vmm.end() || it->first != at || it->second.size > end - at) return {};
    found.push_back(it);
    at += it->second.size;
  }
  return found;
}

Range* reservation_of(Driver& d, std::uintptr_t address, std::size_t bytes) {
  Range* range = d.find(address);
  if (range == nullptr || range->kind != Range::Kind::kReservation) return nullptr;
  return bytes <= range->size - (address - range->begin) ? range : nullptr;
}

CUresult copy_now(Driver& d, Lock& lock, const std::vector<Piece>& target, const std::vector<Piece>& source) {
  const std::shared_ptr<Stream> null_stream = d.stream(nullptr);
  lock.unlock();
  if (const CUresult pending = null_stream->synchronize(); pending != CUDA_SUCCESS) return pending;
  return run_copy(target, source);
}

// One setting of the driver, under its lock (the control API's setters).
template <class Value>
void set(Value Driver::*setting, Value value) {
  Driver& d = driver();
  std::lock_guard lock(d.mutex);
  d.*setting = value;
}

}  // namespace fake_cuda

// The control API (fake_cuda_control.h).
extern "C" {

FAKE_CUDA_EXPORT void fake_cuda_counters(FakeCudaCounters* counters) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  *counters = d.counters();
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_reset(FakeCudaCounters* leaked) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  const FakeCudaCounters live = d.counters();
  if (leaked != nullptr) *leaked = live;
  d.rules.clear();
  d.calls.clear();
  d.device_memory = fake_cuda::kDefaultDeviceMemory;
  d.copy_delay_us = fake_cuda::kDefaultCopyDelayUs;
  d.register_limit = 0;
  d.version = CUDA_VERSION;
  d.largest_registration = 0;
  fake_cuda::async_failures.store(0, std::memory_order_relaxed);
  fake_cuda::streams_held.store(false, std::memory_order_relaxed);
  return live.device_allocations + live.managed_allocations + live.host_allocations + live.physical_allocations +
         live.reservations + live.mappings + live.registered_ranges + live.streams + live.events +
         live.context_references;
}

FAKE_CUDA_EXPORT void fake_cuda_set_device_memory(uint64_t bytes) {
  fake_cuda::set(&fake_cuda::Driver::device_memory, bytes);
}

FAKE_CUDA_EXPORT void fake_cuda_set_copy_delay_us(uint32_t microseconds) {
  fake_cuda::set(&fake_cuda::Driver::copy_delay_us, microseconds);
}

FAKE_CUDA_EXPORT void fake_cuda_set_host_register_limit(uint64_t bytes) {
  fake_cuda::set(&fake_cuda::Driver::register_limit, bytes);
}

FAKE_CUDA_EXPORT void fake_cuda_set_driver_version(int version) {
  fake_cuda::set(&fake_cuda::Driver::version, version);
}

FAKE_CUDA_EXPORT void fake_cuda_hold_streams(int held) {
  fake_cuda::streams_held.store(held != 0, std::memory_order_release);
}

FAKE_CUDA_EXPORT int fake_cuda_fail(const char* entry_point, uint64_t after_calls, int result, int times) {
  if (entry_point == nullptr || fake_cuda::entry_point(entry_point) == nullptr) return -1;
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  if (const auto it = d.rules.find(std::string_view(entry_point)); it != d.rules.end()) d.rules.erase(it);
  if (times != 0) {
    d.rules.insert_or_assign(entry_point, fake_cuda::Rule{after_calls, static_cast<CUresult>(result), times});
  }
  return 0;
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_calls(const char* entry_point) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  const auto it = d.calls.find(std::string_view(entry_point));
  return it == d.calls.end() ? 0 : it->second;
}

}  // extern "C"
