// The fake CUDA driver's control API (fake_cuda/fake_cuda_control.h), found
// in the libcuda.so.1 this process loaded: how a test drives the fake, and
// how it knows that the driver is the fake and not a real one.
#pragma once

#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <dlfcn.h>

#include <map>
#include <memory>
#include <string>
#include <type_traits>

#include "fake_cuda/fake_cuda_control.h"
#include "gpu/cuda_driver.h"
#include "resurgo/config.hpp"

namespace resurgo::gpu {

// Every function of the control API.
struct FakeControl {
  decltype(&fake_cuda_counters) counters;
  decltype(&fake_cuda_reset) reset;
  decltype(&fake_cuda_set_device_count) set_device_count;
  decltype(&fake_cuda_set_device_memory) set_device_memory;
  decltype(&fake_cuda_set_copy_delay_us) set_copy_delay_us;
  decltype(&fake_cuda_set_host_register_limit) set_host_register_limit;
  decltype(&fake_cuda_set_host_register_rate) set_host_register_rate;
  decltype(&fake_cuda_set_copies_across_registrations) set_copies_across_registrations;
  decltype(&fake_cuda_hold_host_register) hold_host_register;
  decltype(&fake_cuda_release_host_register) release_host_register;
  decltype(&fake_cuda_host_register_waiting) host_register_waiting;
  decltype(&fake_cuda_wait_host_register_waiting) wait_host_register_waiting;
  decltype(&fake_cuda_set_driver_version) set_driver_version;
  decltype(&fake_cuda_hold_streams) hold_streams;
  decltype(&fake_cuda_fail) fail;
  decltype(&fake_cuda_calls) calls;
  decltype(&fake_cuda_resolved_with) resolved_with;
};

// A control function of the fake beyond FakeControl's (a suite's own
// needs), looked up in the loaded libcuda.so.1; null where that is not the
// fake or an older build of it.
template <typename Function>
Function fake_function(const char* name) {
  void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return handle ? reinterpret_cast<Function>(::dlsym(handle, name)) : nullptr;
}

// The control API, or why a suite of the fake cannot run here.
struct FakeLookup {
  std::unique_ptr<FakeControl> control;
  std::string why_not;
};

inline const FakeLookup& fake() {
  static const FakeLookup* const lookup = [] {
    auto* found = new FakeLookup;
    const CudaDriver& driver = CudaDriver::instance();  // loads libcuda.so.1 where there is one
    void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) {
      found->why_not = "libcuda.so.1 is not loaded (" + driver.why_unavailable() +
                       "); the fake_cuda.* tests put the fake driver on LD_LIBRARY_PATH";
      return found;
    }
    if (::dlsym(handle, "fake_cuda_reset") == nullptr) {
      found->why_not = "libcuda.so.1 is a real CUDA driver, not the fake";
      return found;
    }
    // The handle stays open: the driver is never unloaded either.
    auto control = std::make_unique<FakeControl>();
    const auto find = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(handle, name));
      return function != nullptr;
    };
    const bool complete =
        find(control->counters, "fake_cuda_counters") && find(control->reset, "fake_cuda_reset") &&
        find(control->set_device_count, "fake_cuda_set_device_count") &&
        find(control->set_device_memory, "fake_cuda_set_device_memory") &&
        find(control->set_copy_delay_us, "fake_cuda_set_copy_delay_us") &&
        find(control->set_host_register_limit, "fake_cuda_set_host_register_limit") &&
        find(control->set_host_register_rate, "fake_cuda_set_host_register_rate") &&
        find(control->set_copies_across_registrations, "fake_cuda_set_copies_across_registrations") &&
        find(control->hold_host_register, "fake_cuda_hold_host_register") &&
        find(control->release_host_register, "fake_cuda_release_host_register") &&
        find(control->host_register_waiting, "fake_cuda_host_register_waiting") &&
        find(control->wait_host_register_waiting, "fake_cuda_wait_host_register_waiting") &&
        find(control->set_driver_version, "fake_cuda_set_driver_version") &&
        find(control->hold_streams, "fake_cuda_hold_streams") && find(control->fail, "fake_cuda_fail") &&
        find(control->calls, "fake_cuda_calls") && find(control->resolved_with, "fake_cuda_resolved_with");
    if (complete) {
      found->control = std::move(control);
    } else {
      found->why_not = "libcuda.so.1 is an older build of the fake driver, without the whole control API";
    }
    return found;
  }();
  return *lookup;
}

// What the fake still holds, for a failure message.
inline std::string describe(const FakeCudaCounters& c) {
  return "device allocations " + std::to_string(c.device_allocations) + ", managed " +
         std::to_string(c.managed_allocations) + ", host " + std::to_string(c.host_allocations) + ", physical " +
         std::to_string(c.physical_allocations) + ", reservations " + std::to_string(c.reservations) +
         ", mappings " + std::to_string(c.mappings) + ", registered ranges " + std::to_string(c.registered_ranges) +
         ", streams " + std::to_string(c.streams) + ", events " + std::to_string(c.events) +
         ", context references " + std::to_string(c.context_references) + ", device bytes " +
         std::to_string(c.device_bytes) + ", registered bytes " + std::to_string(c.registered_bytes);
}

// A test's turn with the fake, for suites that run other code on it: the
// fake's defaults, nothing left by an earlier test, and the primary context
// of device 0 current on this thread, as the application's runtime makes
// it. Each returns "" or what went wrong; finish_fake_turn() releases the
// context and says what the test left behind.
inline std::string start_fake_turn(CUcontext& context) {
  FakeCudaCounters before = {};
  if (fake().control->reset(&before) != 0) return "left by an earlier test: " + describe(before);
  const CudaDriver& driver = CudaDriver::instance();
  if (driver.cuDevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS) return "cuDevicePrimaryCtxRetain failed";
  if (driver.cuCtxSetCurrent(context) != CUDA_SUCCESS) return "cuCtxSetCurrent failed";
  return "";
}

inline std::string finish_fake_turn(CUcontext context) {
  const CudaDriver& driver = CudaDriver::instance();
  if (context != nullptr) driver.cuDevicePrimaryCtxRelease(0);
  driver.cuCtxSetCurrent(nullptr);
  FakeCudaCounters left = {};
  return fake().control->reset(&left) == 0 ? "" : "leaked: " + describe(left);
}

// The options of a store whose device regions go through the CUDA driver
// (the fake, in these suites) into an L0 cache of `capacity`, mapped 4 MiB
// at a time, its L2 under `directory`; `more` adds or overrides options.
inline Config cuda_store_config(const std::string& directory, const std::string& capacity,
                                const std::map<std::string, std::string>& more = {}) {
  std::map<std::string, std::string> keys = {{"local.path", directory + "/l2"},
                                             {"persistent.every", "0"},
                                             {"device.backend", "cuda"},
                                             {"device.capacity", capacity},
                                             {"device.chunk", "4MiB"},
                                             {"buffer.pin_token_dir", ""},
                                             {"log.level", "off"}};
  for (const auto& [key, value] : more) keys[key] = value;
  return Config::load("", keys);
}

}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
