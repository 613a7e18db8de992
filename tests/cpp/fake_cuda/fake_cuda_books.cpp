#include "fake_cuda_books.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

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

namespace {

std::atomic<pid_t> driver_process{0};

// One page shared with every child forked from now on (MAP_SHARED), so that
// the parent reads what its children tried.
std::atomic<std::uint64_t>& forked_child_calls() {
  static auto* const shared = [] {
    void* page = ::mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) std::abort();
    return new (page) std::atomic<std::uint64_t>(0);
  }();
  return *shared;
}

}  // namespace

void set_driver_process() {
  forked_child_calls();  // mapped before any fork
  pid_t none = 0;
  driver_process.compare_exchange_strong(none, ::getpid());
}

bool refuse_forked_child(const char* name) {
  const pid_t owner = driver_process.load();
  if (owner == 0 || owner == ::getpid()) return false;
  forked_child_calls().fetch_add(1);
  char line[160];
  const int length = std::snprintf(line, sizeof line,
                                   "fake CUDA driver: %s called from a forked child (pid %d) of the process that "
                                   "initialised the driver (pid %d)\n",
                                   name, static_cast<int>(::getpid()), static_cast<int>(owner));
  if (length > 0) {
    const ssize_t written = ::write(STDERR_FILENO, line, static_cast<std::size_t>(length));
    static_cast<void>(written);  // without stderr the count still tells
  }
  return true;
}

CUcontext& current_context() {
  thread_local CUcontext context = nullptr;
  return context;
}

std::vector<CUcontext>& pushed_contexts() {
  thread_local std::vector<CUcontext> contexts;
  return contexts;
}

void Context::retire_streams() {
  if (legacy_stream) legacy_stream->retire();
  legacy_stream.reset();
  for (auto& [thread, stream] : per_thread_streams) stream->retire();
  per_thread_streams.clear();
}

Driver::Driver() {
  for (int ordinal = 0; ordinal < kMaxDevices; ++ordinal) devices[ordinal].primary.device = ordinal;
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
  if (needs == Needs::kContext && current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

bool Driver::has_room(int device, std::uint64_t bytes) const {
  return bytes <= device_memory - std::min(device_memory, devices[device].allocated);
}

Context* Driver::context(CUcontext handle) {
  for (Device& device : devices) {
    if (handle == device.primary.handle() && device.primary.references > 0) return &device.primary;
  }
  return nullptr;
}

Context* Driver::current() { return context(current_context()); }

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

CUresult Driver::device_pieces(CUdeviceptr address, std::size_t bytes, bool write, int device,
                               std::vector<Piece>& pieces) {
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
    const auto it = mapping_at(*range, at);
    if (it == range->vmm.end() || (it->second.access[device] & needed) != needed) return CUDA_ERROR_INVALID_VALUE;
    const Range::Vmm& vmm = it->second;
    const std::size_t into = at - it->first;
    const std::size_t piece = std::min<std::size_t>(end - at, vmm.size - into);
    pieces.push_back({vmm.mapping->backing->data() + into, piece, vmm.mapping});
    at += piece;
  }
  return CUDA_SUCCESS;
}

// The cuMemcpy documentation: "Memory regions requested must be either
// entirely registered with CUDA, or in the case of host pageable transfers,
// not registered at all. Memory regions spanning over allocations that are
// both registered and not registered with CUDA are not supported and will
// return CUDA_ERROR_INVALID_VALUE." A span over several registrations that
// lie back to back is not documented: refused unless
// fake_cuda_set_copies_across_registrations allows it.
CUresult Driver::host_pieces(const void* host, std::size_t bytes, std::vector<Piece>& pieces, bool& registered) {
  registered = false;
  if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_SUCCESS;
  const auto begin = reinterpret_cast<std::uintptr_t>(host);
  const std::uintptr_t end = begin + bytes;
  std::vector<Piece> known;
  std::size_t covered = 0;
  for (auto it = first_overlap(ranges, begin, bytes); it != ranges.end() && it->first < end; ++it) {
    const Range& range = it->second;
    if (range.kind == Range::Kind::kDevice || range.kind == Range::Kind::kReservation) return CUDA_ERROR_INVALID_VALUE;
    const std::uintptr_t from = std::max(begin, range.begin);
    const std::size_t piece = std::min(end, range.begin + range.size) - from;
    // Pinned or managed memory is kept while the copy waits; registered memory is the caller's.
    known.push_back({reinterpret_cast<std::byte*>(from), piece, range.mapping});
    covered += piece;
  }
  if (known.empty()) {
    pieces.push_back({reinterpret_cast<std::byte*>(begin), bytes, nullptr});
    return CUDA_SUCCESS;
  }
  if (covered < bytes) return CUDA_ERROR_INVALID_VALUE;
  if (known.size() > 1 && !copies_across_registrations) return CUDA_ERROR_INVALID_VALUE;
  pieces.insert(pieces.end(), known.begin(), known.end());
  registered = true;
  return CUDA_SUCCESS;
}

CUresult Driver::copy_pieces(Side target, Side source, std::size_t bytes, int device, std::vector<Piece>& to,
                             std::vector<Piece>& from, bool& registered) {
  registered = false;
  const auto pieces = [&](Side side, bool write, std::vector<Piece>& out) {
    if (side.host) return host_pieces(reinterpret_cast<const void*>(side.address), bytes, out, registered);
    return device_pieces(side.address, bytes, write, device, out);
  };
  if (const CUresult r = pieces(target, true, to); r != CUDA_SUCCESS) return r;
  if (const CUresult r = pieces(source, false, from); r != CUDA_SUCCESS) return r;
  if (source.host && !target.host && bytes > 0) ++host_to_device_copies[registered ? 1 : 0];
  return CUDA_SUCCESS;
}

Owned<Stream> Driver::stream(CUstream handle) {
  Context* context = current();
  if (handle == nullptr || handle == CU_STREAM_LEGACY) {
    if (!context->legacy_stream) context->legacy_stream = Stream::start();
    return {context->legacy_stream, context};
  }
  if (handle == CU_STREAM_PER_THREAD) {
    std::shared_ptr<Stream>& own = context->per_thread_streams[std::this_thread::get_id()];
    if (!own) own = Stream::start();
    return {own, context};
  }
  const auto it = streams.find(handle);
  return it == streams.end() ? Owned<Stream>{} : it->second;
}

void Driver::launch_kernel_writes(const Stream& stream) {
  std::erase_if(kernel_writes, [&](KernelWrite& write) {
    if (write.stream.get() != &stream) return false;
    write.stream->enqueue([target = std::move(write.target), bytes = std::move(write.bytes)] {
      return run_copy(target, {Piece{bytes->data(), bytes->size(), nullptr}});
    }, Clock::now());
    return true;
  });
}

void Driver::launch_kernel_writes(const Context& context) {
  std::vector<const Stream*> streams_of_context;
  for (const KernelWrite& write : kernel_writes) {
    if (write.context == &context) streams_of_context.push_back(write.stream.get());
  }
  for (const Stream* stream : streams_of_context) launch_kernel_writes(*stream);
}

Clock::time_point Driver::due() const { return Clock::now() + std::chrono::microseconds(copy_delay_us); }

void Driver::wait_if_held(Lock& lock) {
  RegisterHold& hold = register_hold;
  if (!hold.on) return;
  if (hold.passed < hold.after) {
    ++hold.passed;
    return;
  }
  const std::uint64_t releases = hold.releases;
  ++hold.waiting;
  registration_changed.notify_all();
  registration_changed.wait(lock, [&] { return hold.releases != releases; });
  --hold.waiting;
}

void Driver::free_if_unused(std::map<CUmemGenericAllocationHandle, Physical>::iterator it) {
  if (!it->second.released || it->second.mappings > 0) return;
  devices[it->second.device].allocated -= it->second.backing->size();
  physical.erase(it);
}

FakeCudaCounters Driver::counters() {
  FakeCudaCounters result = {};
  for (const Device& device : devices) {
    result.device_bytes += device.allocated;
    result.context_references += static_cast<std::uint64_t>(device.primary.references);
  }
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
  result.largest_registration = largest_registration;
  result.async_failures = async_failures.load(std::memory_order_relaxed);
  return result;
}

CUresult check_properties(const Driver& d, const CUmemAllocationProp* properties) {
  if (properties == nullptr || properties->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      properties->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return d.valid_device(properties->location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

std::map<std::uintptr_t, Range::Vmm>::iterator mapping_at(Range& reservation, std::uintptr_t address) {
  auto it = reservation.vmm.upper_bound(address);
  if (it == reservation.vmm.begin()) return reservation.vmm.end();
  --it;
  return address - it->first < it->second.size ? it : reservation.vmm.end();
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

// One setting of the driver, under its lock (the control API's setters).
template <class Value>
void set(Value Driver::*setting, Value value) {
  Driver& d = driver();
  std::lock_guard lock(d.mutex);
  d.*setting = value;
}

// Lets the cuMemHostRegister calls a hold blocks go, and holds no more.
void release_host_register(Driver& d) {
  d.register_hold = RegisterHold{false, 0, 0, d.register_hold.waiting, d.register_hold.releases + 1};
  d.registration_changed.notify_all();
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
  fake_cuda::forked_child_calls().store(0);
  d.resolutions.clear();
  d.device_count = 1;
  for (fake_cuda::Device& device : d.devices) device.copies = 0;
  d.device_memory = fake_cuda::kDefaultDeviceMemory;
  d.copy_delay_us = fake_cuda::kDefaultCopyDelayUs;
  d.register_limit = 0;
  d.register_rate = fake_cuda::kDefaultRegisterRate;
  d.copies_across_registrations = false;
  fake_cuda::release_host_register(d);
  d.version = CUDA_VERSION;
  d.largest_registration = 0;
  d.host_to_device_copies = {};
  d.kernel_writes.clear();
  fake_cuda::async_failures.store(0, std::memory_order_relaxed);
  fake_cuda::streams_held.store(false, std::memory_order_relaxed);
  return live.device_allocations + live.managed_allocations + live.host_allocations + live.physical_allocations +
         live.reservations + live.mappings + live.registered_ranges + live.streams + live.events +
         live.context_references;
}

FAKE_CUDA_EXPORT int fake_cuda_set_device_count(int count) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  if (count < 1 || count > fake_cuda::kMaxDevices) return -1;
  if (count == d.device_count) return 0;
  for (const fake_cuda::Device& device : d.devices) {
    if (device.primary.references > 0) return -1;
  }
  d.device_count = count;
  return 0;
}

FAKE_CUDA_EXPORT int fake_cuda_device_books(int device, FakeCudaDeviceBooks* books) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  if (device < 0 || device >= fake_cuda::kMaxDevices || books == nullptr) return -1;
  const fake_cuda::Device& books_of = d.devices[static_cast<std::size_t>(device)];
  *books = FakeCudaDeviceBooks{books_of.allocated, books_of.copies,
                               static_cast<uint64_t>(books_of.primary.references)};
  return 0;
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

FAKE_CUDA_EXPORT void fake_cuda_set_host_register_rate(uint64_t bytes_per_second) {
  fake_cuda::set(&fake_cuda::Driver::register_rate, bytes_per_second);
}

FAKE_CUDA_EXPORT void fake_cuda_set_copies_across_registrations(int allowed) {
  fake_cuda::set(&fake_cuda::Driver::copies_across_registrations, allowed != 0);
}

FAKE_CUDA_EXPORT void fake_cuda_hold_host_register(uint64_t after_calls) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  d.register_hold.on = true;
  d.register_hold.after = after_calls;
  d.register_hold.passed = 0;
}

FAKE_CUDA_EXPORT void fake_cuda_release_host_register(void) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  fake_cuda::release_host_register(d);
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_host_register_waiting(void) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  return d.register_hold.waiting;
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_wait_host_register_waiting(uint64_t count) {
  fake_cuda::Driver& d = fake_cuda::driver();
  fake_cuda::Lock lock(d.mutex);
  d.registration_changed.wait_for(lock, std::chrono::seconds(10), [&] { return d.register_hold.waiting >= count; });
  return d.register_hold.waiting;
}

FAKE_CUDA_EXPORT void fake_cuda_set_driver_version(int version) {
  fake_cuda::set(&fake_cuda::Driver::version, version);
}

FAKE_CUDA_EXPORT void fake_cuda_hold_streams(int held) {
  fake_cuda::streams_held.store(held != 0, std::memory_order_release);
}

FAKE_CUDA_EXPORT int fake_cuda_fail(const char* entry_point, uint64_t after_calls, int result, int times) {
  if (entry_point == nullptr || !fake_cuda::entry_point(entry_point, INT_MAX, false).known) return -1;
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  if (const auto it = d.rules.find(std::string_view(entry_point)); it != d.rules.end()) d.rules.erase(it);
  if (times != 0) {
    d.rules.insert_or_assign(entry_point, fake_cuda::Rule{after_calls, static_cast<CUresult>(result), times});
  }
  return 0;
}

FAKE_CUDA_EXPORT int fake_cuda_kernel_write(void* stream, void* target, const void* source, size_t bytes) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (d.current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const auto address = reinterpret_cast<std::uintptr_t>(target);
  const fake_cuda::Range* range = d.find(address);
  if (source == nullptr || bytes == 0 || range == nullptr || range->kind != fake_cuda::Range::Kind::kManaged ||
      address + bytes > range->begin + range->size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const fake_cuda::Owned<fake_cuda::Stream> queue =
      d.stream(stream == nullptr ? CU_STREAM_LEGACY : static_cast<CUstream>(stream));
  if (queue.object == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<fake_cuda::Piece> pieces;
  if (const CUresult r = d.device_pieces(address, bytes, true, queue.context->device, pieces); r != CUDA_SUCCESS) {
    return r;
  }
  const auto* first = static_cast<const std::byte*>(source);
  d.kernel_writes.push_back({queue.object, queue.context, std::move(pieces),
                             std::make_shared<std::vector<std::byte>>(first, first + bytes)});
  return CUDA_SUCCESS;
}

FAKE_CUDA_EXPORT int fake_cuda_prefetch_location(const void* pointer) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  const fake_cuda::Range* range = d.find(reinterpret_cast<std::uintptr_t>(pointer));
  return range != nullptr && range->kind == fake_cuda::Range::Kind::kManaged ? range->prefetched_to
                                                                              : CU_DEVICE_INVALID;
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_forked_child_calls(void) { return fake_cuda::forked_child_calls().load(); }

FAKE_CUDA_EXPORT uint64_t fake_cuda_calls(const char* entry_point) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  const auto it = d.calls.find(std::string_view(entry_point));
  return it == d.calls.end() ? 0 : it->second;
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_host_to_device_copies(int registered) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  return d.host_to_device_copies[registered != 0 ? 1 : 0];
}

FAKE_CUDA_EXPORT uint64_t fake_cuda_resolved_with(const char* entry_point, uint64_t flags) {
  fake_cuda::Driver& d = fake_cuda::driver();
  std::lock_guard lock(d.mutex);
  const auto it = d.resolutions.find({entry_point, flags});
  return it == d.resolutions.end() ? 0 : it->second;
}

}  // extern "C"
