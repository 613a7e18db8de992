// The fake CUDA driver's books (fake_cuda_driver.cpp says what is
// emulated): the devices and their primary contexts, the address ranges it
// knows, physical memory, streams, events, call counts and failure rules,
// all under one mutex; and what the entry points share to admit a call,
// check its memory and copy.
#pragma once

#include <cuda.h>
#include <unistd.h>

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fake_cuda_control.h"
#include "fake_cuda_streams.h"

#define FAKE_CUDA_EXPORT __attribute__((visibility("default")))

namespace fake_cuda {

constexpr std::size_t kGranularity = std::size_t{2} << 20;
constexpr std::uint64_t kDefaultDeviceMemory = std::uint64_t{16} << 30;
constexpr std::uint32_t kDefaultCopyDelayUs = 200;
// Bytes per second cuMemHostRegister pins (fake_cuda_set_host_register_rate).
constexpr std::uint64_t kDefaultRegisterRate = std::uint64_t{8} << 30;
constexpr int kMaxDevices = 8;
inline const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

inline std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// An address range the driver knows. Ranges never overlap.
struct Range {
  enum class Kind { kDevice, kManaged, kPinnedHost, kRegisteredHost, kReservation };
  // A cuMemMap into a reservation.
  struct Vmm {
    std::size_t size;
    CUmemGenericAllocationHandle handle;
    std::shared_ptr<Mapping> mapping;
    int device;  // of the physical memory
    // What cuMemSetAccess gave each device, by ordinal (PROT_NONE, 0, until then).
    std::array<CUmemAccess_flags, kMaxDevices> access{};
  };

  Kind kind;
  std::uintptr_t begin;
  std::size_t size;
  int device;                        // allocated or registered for (a reservation: its mappings say)
  std::shared_ptr<Mapping> mapping;  // allocations (kDevice, kManaged, kPinnedHost)
  std::size_t view_bytes = 0;        // kDevice: the mapping at the device address, whole pages
  std::map<std::uintptr_t, Vmm> vmm;  // kReservation: by address
  // kManaged: where the last cuMemPrefetchAsync of any part of it went (a
  // device ordinal, CU_DEVICE_CPU), CU_DEVICE_INVALID before any.
  int prefetched_to = CU_DEVICE_INVALID;
};

// cuMemCreate memory: freed once released and no longer mapped.
struct Physical {
  std::shared_ptr<Backing> backing;
  int device;
  int mappings = 0;
  bool released = false;
};

// A device's primary context, the only kind the fake has. Its null streams
// start at first use while it is active and end with its last release.
struct Context {
  CUcontext handle() { return reinterpret_cast<CUcontext>(this); }
  void retire_streams();

  int device = 0;
  int references = 0;
  std::shared_ptr<Stream> legacy_stream;
  // The per-thread default streams (CU_STREAM_PER_THREAD), by thread.
  std::map<std::thread::id, std::shared_ptr<Stream>> per_thread_streams;
};

struct Device {
  Context primary;
  std::uint64_t allocated = 0;  // cuMemAlloc and cuMemCreate bytes not yet freed
  std::uint64_t copies = 0;     // run in its context since the last reset
};

// A stream or an event, and the context current when it was created.
template <class Object>
struct Owned {
  std::shared_ptr<Object> object;
  Context* context = nullptr;
};

// fake_cuda_hold_host_register: the cuMemHostRegister calls after the first
// `after` ones wait until the hold is released.
struct RegisterHold {
  bool on = false;
  std::uint64_t after = 0;
  std::uint64_t passed = 0;
  std::uint64_t waiting = 0;
  std::uint64_t releases = 0;  // a waiting call goes on once this changed
};

struct Rule {
  std::uint64_t after;
  CUresult result;
  int times;  // < 0: every call
  std::uint64_t passed = 0;
};

// What a call needs before it may run.
enum class Needs { kNothing, kInit, kContext };

// One side of a copy: memory the application names by a host pointer or
// by a device address.
struct Side {
  bool host;
  std::uintptr_t address;
};

// The entry of `map` (keyed by start address, values with a `size`) that
// overlaps [begin, begin + bytes) first, or end().
template <typename Map>
typename Map::iterator first_overlap(Map& map, std::uintptr_t begin, std::size_t bytes) {
  auto it = map.upper_bound(begin);
  if (it != map.begin() && std::prev(it)->first + std::prev(it)->second.size > begin) return std::prev(it);
  return it != map.end() && it->first < begin + bytes ? it : map.end();
}

using Lock = std::unique_lock<std::mutex>;

// The driver's books, all under `mutex`.
struct Driver {
  Driver();

  std::mutex mutex;
  // A held cuMemHostRegister started or stopped waiting.
  std::condition_variable registration_changed;
  bool initialized = false;
  int version = CUDA_VERSION;
  int device_count = 1;
  std::array<Device, kMaxDevices> devices;
  std::uint64_t device_memory = kDefaultDeviceMemory;  // of each device
  std::uint64_t register_limit = 0;
  std::uint64_t register_rate = kDefaultRegisterRate;
  bool copies_across_registrations = false;
  RegisterHold register_hold;
  std::uint64_t largest_registration = 0;
  // Successful host-to-device copies since the last reset, by where their
  // host side lay: [0] pageable, [1] memory CUDA knows (registered, pinned).
  std::array<std::uint64_t, 2> host_to_device_copies{};
  std::uint32_t copy_delay_us = kDefaultCopyDelayUs;
  std::map<std::uintptr_t, Range> ranges;
  // cuMemHostRegister calls under way: not registered yet, but a second
  // registration overlapping one fails.
  std::map<std::uintptr_t, Range> registering;
  std::map<CUmemGenericAllocationHandle, Physical> physical;
  CUmemGenericAllocationHandle next_handle = 1;
  std::map<CUstream, Owned<Stream>> streams;
  std::map<CUevent, Owned<Event>> events;
  std::map<std::string, std::uint64_t, std::less<>> calls;
  // Successful cuGetProcAddress calls, by base name and flags.
  std::map<std::pair<std::string, cuuint64_t>, std::uint64_t> resolutions;
  std::map<std::string, Rule, std::less<>> rules;
  // fake_cuda_kernel_write: what a kernel wrote to managed memory, not yet
  // visible to the host (as on a GPU, until a synchronisation says the
  // kernel is done). Each write joins its stream's queue once the stream or
  // its context is synchronised, or ahead of the next operation enqueued on
  // that stream (stream order), and lands when the stream reaches it.
  struct KernelWrite {
    std::shared_ptr<Stream> stream;
    const Context* context;
    std::vector<Piece> target;
    std::shared_ptr<std::vector<std::byte>> bytes;
  };
  std::vector<KernelWrite> kernel_writes;

  CUresult admit(const char* name, Needs needs);
  bool valid_device(CUdevice ordinal) const { return ordinal >= 0 && ordinal < device_count; }
  // Whether `device` has `bytes` of device memory left.
  bool has_room(int device, std::uint64_t bytes) const;
  // The primary context `handle` names while it is active, or null.
  Context* context(CUcontext handle);
  // The calling thread's current context while it is active, or null.
  Context* current();
  Range* find(std::uintptr_t address);
  Range* find_base(std::uintptr_t address, Range::Kind kind);
  void insert(Range range);
  // Appends the pieces of [address, address + bytes) a copy run by `device`
  // reads (or writes): all of it device or managed memory of any device
  // (unified addressing), or mappings of one reservation that `device` may
  // access so; CUDA_ERROR_INVALID_VALUE otherwise.
  CUresult device_pieces(CUdeviceptr address, std::size_t bytes, bool write, int device, std::vector<Piece>& pieces);
  // The host side of a copy: no part of it device memory, and all of it
  // either memory CUDA knows (registered, pinned or managed: `registered`)
  // or pageable.
  CUresult host_pieces(const void* host, std::size_t bytes, std::vector<Piece>& pieces, bool& registered);
  // Both sides of a copy run by `device`.
  CUresult copy_pieces(Side target, Side source, std::size_t bytes, int device, std::vector<Piece>& to,
                       std::vector<Piece>& from, bool& registered);
  // The stream `handle` names in the current context (CU_STREAM_LEGACY and
  // CU_STREAM_PER_THREAD: its null streams); none for an unknown handle.
  Owned<Stream> stream(CUstream handle);
  // When an operation enqueued now runs (fake_cuda_set_copy_delay_us).
  Clock::time_point due() const;
  // Blocks a cuMemHostRegister call while fake_cuda_hold_host_register says so.
  void wait_if_held(Lock& lock);
  void free_if_unused(std::map<CUmemGenericAllocationHandle, Physical>::iterator it);
  // Moves the kernel writes of `stream` (or of every stream of `context`)
  // into their stream's queue.
  void launch_kernel_writes(const Stream& stream);
  void launch_kernel_writes(const Context& context);
  FakeCudaCounters counters();
};

// Never destroyed: stream workers and late calls may outlive static destructors.
Driver& driver();
// The calling thread's current context (null: none).
CUcontext& current_context();
// The contexts below the current one on this thread's stack
// (cuCtxPushCurrent / cuCtxPopCurrent); cuCtxSetCurrent replaces the top.
std::vector<CUcontext>& pushed_contexts();

// The process that called cuInit first owns the driver. A forked child
// must never call it (its copy of the context is the parent's, and of the
// driver's mutex, which another thread may have held at fork): such a call
// is counted where parent and children share it
// (fake_cuda_forked_child_calls), said on stderr, and refused
// (CUDA_ERROR_NOT_PERMITTED) before it takes any lock.
void set_driver_process();
bool refuse_forked_child(const char* name);

// Counts the call, applies a failure rule and the call's needs, then runs
// `body(driver, lock)` under the driver's mutex (which a body that waits
// gives up first).
template <typename Body>
CUresult call(const char* name, Needs needs, Body&& body) {
  if (refuse_forked_child(name)) return CUDA_ERROR_NOT_PERMITTED;
  Driver& d = driver();
  Lock lock(d.mutex);
  if (const CUresult admitted = d.admit(name, needs); admitted != CUDA_SUCCESS) return admitted;
  return body(d, lock);
}

// CUDA_SUCCESS for properties of pinned memory on a device there is.
CUresult check_properties(const Driver& d, const CUmemAllocationProp* properties);
// The mapping of `reservation` that holds `address`, or vmm.end().
std::map<std::uintptr_t, Range::Vmm>::iterator mapping_at(Range& reservation, std::uintptr_t address);
// The mappings of `reservation` that make up [address, address + bytes)
// exactly; none when the range starts or ends inside one or has a gap
// (cuMemUnmap and cuMemSetAccess take whole mappings).
std::vector<std::map<std::uintptr_t, Range::Vmm>::iterator> whole_mappings(Range& reservation, std::uintptr_t address,
                                                                           std::size_t bytes);
// The reservation holding all of [address, address + bytes), or null.
Range* reservation_of(Driver& d, std::uintptr_t address, std::size_t bytes);

// What cuGetProcAddress finds for `name` (a base name): whether the fake
// implements it, and the variant for `cuda_version`, a per-thread default
// stream one first when `per_thread`; null when every variant is newer
// (fake_cuda_driver.cpp).
struct Found {
  bool known;
  void* function;
};
Found entry_point(std::string_view name, int cuda_version, bool per_thread);

}  // namespace fake_cuda
