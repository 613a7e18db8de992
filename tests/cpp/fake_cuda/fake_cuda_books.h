// The fake CUDA driver's books (fake_cuda_driver.cpp says what is
// emulated): the address ranges it knows, physical memory, streams, events,
// the primary context, call counts and failure rules, all under one mutex;
// and what the entry points share to admit a call, check its memory and
// copy.
#pragma once

#include <cuda.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "fake_cuda_control.h"
#include "fake_cuda_streams.h"

#define FAKE_CUDA_EXPORT __attribute__((visibility("default")))

namespace fake_cuda {

constexpr std::size_t kGranularity = std::size_t{2} << 20;
constexpr std::uint64_t kDefaultDeviceMemory = std::uint64_t{16} << 30;
constexpr std::uint32_t kDefaultCopyDelayUs = 200;
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
  };

  Kind kind;
  std::uintptr_t begin;
  std::size_t size;
  std::shared_ptr<Mapping> mapping;  // allocations (kDevice, kManaged, kPinnedHost)
  std::size_t view_bytes = 0;        // kDevice: the mapping at the device address, whole pages
  std::map<std::uintptr_t, Vmm> vmm;  // kReservation: by address
};

// cuMemCreate memory: freed once released and no longer mapped.
struct Physical {
  std::shared_ptr<Backing> backing;
  int mappings = 0;
  bool released = false;
};

struct Rule {
  std::uint64_t after;
  CUresult result;
  int times;  // < 0: every call
  std::uint64_t passed = 0;
};

// What a call needs before it may run.
enum class Needs { kNothing, kInit, kContext };

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
  std::mutex mutex;
  bool initialized = false;
  int version = CUDA_VERSION;
  std::uint64_t device_memory = kDefaultDeviceMemory;
  std::uint64_t device_bytes = 0;
  std::uint64_t register_limit = 0;
  std::uint64_t largest_registration = 0;
  std::uint32_t copy_delay_us = kDefaultCopyDelayUs;
  struct PrimaryContext {
    int references = 0;
    std::shared_ptr<Stream> null_stream;  // started at first use while the context is active
  } primary;
  std::map<std::uintptr_t, Range> ranges;
  std::map<CUmemGenericAllocationHandle, Physical> physical;
  CUmemGenericAllocationHandle next_handle = 1;
  std::map<CUstream, std::shared_ptr<Stream>> streams;
  std::map<CUevent, std::shared_ptr<Event>> events;
  std::map<std::string, std::uint64_t, std::less<>> calls;
  std::map<std::string, Rule, std::less<>> rules;

  CUcontext primary_handle() { return reinterpret_cast<CUcontext>(&primary); }
  CUresult admit(const char* name, Needs needs);
  Range* find(std::uintptr_t address);
  Range* find_base(std::uintptr_t address, Range::Kind kind);
  void insert(Range range);
  // Appends the pieces of [address, address + bytes) a copy reads (or
  // writes): all of it device or managed memory, or mappings of one
  // reservation accessible so; CUDA_ERROR_INVALID_VALUE otherwise.
  CUresult device_pieces(CUdeviceptr address, std::size_t bytes, bool write, std::vector<Piece>& pieces);
  // The host side of a copy: no part of it device memory.
  CUresult host_pieces(const void* host, std::size_t bytes, std::vector<Piece>& pieces);
  std::shared_ptr<Stream> stream(CUstream handle);
  // Enqueues the copy (a fill of `fill` when `source` is empty).
  CUresult enqueue_copy(CUstream handle, std::vector<Piece> target, std::vector<Piece> source, unsigned char fill);
  void free_if_unused(std::map<CUmemGenericAllocationHandle, Physical>::iterator it);
  FakeCudaCounters counters();
};

// Never destroyed: stream workers and late calls may outlive static destructors.
Driver& driver();
// The calling thread's current context (null: none).
CUcontext& current_context();
// The contexts below the current one on this thread's stack
// (cuCtxPushCurrent / cuCtxPopCurrent); cuCtxSetCurrent replaces the top.
std::vector<CUcontext>& pushed_contexts();

// Counts the call, applies a failure rule and the call's needs, then runs
// `body(driver, lock)` under the driver's mutex (which a body that waits
// gives up first).
template <typename Body>
CUresult call(const char* name, Needs needs, Body&& body) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (const CUresult admitted = d.admit(name, needs); admitted != CUDA_SUCCESS) return admitted;
  return body(d, lock);
}

// CUDA_SUCCESS for properties of pinned memory on device 0.
CUresult check_properties(const CUmemAllocationProp* properties);
// The mappings of `reservation` that make up [address, address + bytes)
// exactly; none when the range starts or ends inside one or has a gap
// (cuMemUnmap and cuMemSetAccess take whole mappings).
std::vector<std::map<std::uintptr_t, Range::Vmm>::iterator> whole_mappings(Range& reservation, std::uintptr_t address,
                                                                           std::size_t bytes);
// The reservation holding all of [address, address + bytes), or null.
Range* reservation_of(Driver& d, std::uintptr_t address, std::size_t bytes);
// Synchronous copies run on the calling thread, after the null stream's work.
CUresult copy_now(Driver& d, Lock& lock, const std::vector<Piece>& target, const std::vector<Piece>& source);

// The entry point cuGetProcAddress gives for `name` (a base name), or null
// (fake_cuda_driver.cpp).
void* entry_point(std::string_view name);

}  // namespace fake_cuda
