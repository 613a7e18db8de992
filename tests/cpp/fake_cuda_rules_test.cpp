// The rules of NVIDIA's driver the fake CUDA driver (tests/cpp/fake_cuda)
// enforces, tested through the driver API itself, every entry point
// resolved here with cuGetProcAddress: which variant cuGetProcAddress hands
// out for a version and flags, several devices and their contexts,
// streams and events bound to their context, host registration that takes
// time and copies over memory partly registered, and a cuMemcpyHtoD from
// pageable memory that returns before the device has the bytes. Each rule
// is one the fake's control API (fake_cuda_control.h) makes visible. The
// suite runs where libcuda.so.1 is the fake and skips elsewhere, saying why.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "base/units.h"
#include "fake_cuda_lookup.h"
#include "host_pages.h"

namespace resurgo::gpu {
namespace {

#define EXPECT_CU(call) EXPECT_EQ((call), CUDA_SUCCESS) << #call
#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

using GetProcAddress = decltype(&::cuGetProcAddress);

// cuGetProcAddress_v2 of the libcuda.so.1 that fake() found loaded.
GetProcAddress get_proc_address() {
  static const auto found = reinterpret_cast<GetProcAddress>(
      ::dlsym(::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "cuGetProcAddress_v2"));
  return found;
}

// What cuGetProcAddress says of `name`.
struct Resolved {
  CUresult result;
  void* function;
  CUdriverProcAddressQueryResult status;
};

Resolved query(const char* name, int cuda_version, cuuint64_t flags) {
  Resolved resolved{CUDA_ERROR_UNKNOWN, nullptr, CU_GET_PROC_ADDRESS_SUCCESS};
  resolved.result = get_proc_address()(name, &resolved.function, cuda_version, flags, &resolved.status);
  return resolved;
}

// `name` as cuGetProcAddress hands it out, or null.
template <class Function>
Function resolve(const char* name, cuuint64_t flags, int cuda_version = CUDA_VERSION) {
  const Resolved resolved = query(name, cuda_version, flags);
  if (resolved.result != CUDA_SUCCESS || resolved.status != CU_GET_PROC_ADDRESS_SUCCESS) return nullptr;
  return reinterpret_cast<Function>(resolved.function);
}

// clang-format off
#define FAKE_RULES_ENTRY_POINTS(X)                                                                          \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain)               \
  X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxGetState) X(cuCtxSetCurrent) X(cuCtxGetCurrent)          \
  X(cuCtxPushCurrent) X(cuCtxPopCurrent)                                                                    \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)      \
  X(cuMemSetAccess) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocManaged) X(cuMemHostAlloc) X(cuMemFreeHost)    \
  X(cuMemHostRegister) X(cuMemHostUnregister)                                                               \
  X(cuMemcpyDtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoH) X(cuMemcpyHtoD)            \
  X(cuMemsetD8Async) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                           \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy)           \
  X(cuPointerGetAttribute)
// clang-format on

// The entry points the tests call, resolved with `flags`.
struct Entries {
  explicit Entries(cuuint64_t flags) {
#define FAKE_RULES_RESOLVE(name) name = resolve<decltype(&::name)>(#name, flags);
    FAKE_RULES_ENTRY_POINTS(FAKE_RULES_RESOLVE)
#undef FAKE_RULES_RESOLVE
    // The variants without a context argument: from 13000 on,
    // cuGetProcAddress hands out cuCtxGetDevice_v2 and cuCtxSynchronize_v2.
    cuCtxGetDevice = resolve<decltype(&::cuCtxGetDevice)>("cuCtxGetDevice", flags, 12000);
    cuCtxSynchronize = resolve<decltype(&::cuCtxSynchronize)>("cuCtxSynchronize", flags, 12000);
  }
  bool complete() const {
    bool all = cuCtxGetDevice != nullptr && cuCtxSynchronize != nullptr;
#define FAKE_RULES_FOUND(name) all = all && name != nullptr;
    FAKE_RULES_ENTRY_POINTS(FAKE_RULES_FOUND)
#undef FAKE_RULES_FOUND
    return all;
  }

#define FAKE_RULES_MEMBER(name) decltype(&::name) name = nullptr;
  FAKE_RULES_ENTRY_POINTS(FAKE_RULES_MEMBER)
#undef FAKE_RULES_MEMBER
  decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
  decltype(&::cuCtxSynchronize) cuCtxSynchronize = nullptr;
};

// As resurgo resolves them: the legacy default stream.
const Entries& cu() {
  static const Entries entries(CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  return entries;
}

// The per-thread variants: the null stream is the thread's default stream.
const Entries& per_thread() {
  static const Entries entries(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  return entries;
}

std::vector<unsigned char> bytes_of(const unsigned char* data, std::size_t count) {
  return std::vector<unsigned char>(data, data + count);
}

// Each test starts with the fake's defaults, the primary context of device
// 0 current on the test thread, and must leave nothing behind.
class FakeCudaRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    FakeCudaCounters before = {};
    ASSERT_EQ(control().reset(&before), 0u) << "left by an earlier test: " << describe(before);
    ASSERT_TRUE(cu().complete() && per_thread().complete()) << "the fake lacks entry points";
    ASSERT_CU(cu().cuInit(0));
    ASSERT_CU(cu().cuDevicePrimaryCtxRetain(&context_, 0));
    ASSERT_CU(cu().cuCtxSetCurrent(context_));
  }

  void TearDown() override {
    if (!fake().control) return;
    cu().cuCtxSetCurrent(nullptr);
    if (context_ != nullptr) cu().cuDevicePrimaryCtxRelease(0);
    FakeCudaCounters left = {};
    EXPECT_EQ(control().reset(&left), 0u) << "leaked: " << describe(left);
  }

  static const FakeControl& control() { return *fake().control; }
  static FakeCudaCounters counters() {
    FakeCudaCounters now = {};
    control().counters(&now);
    return now;
  }

  // `count` devices: the count changes only while no context is retained.
  void use_devices(int count) {
    ASSERT_CU(cu().cuDevicePrimaryCtxRelease(0));
    ASSERT_EQ(control().set_device_count(count), 0);
    ASSERT_CU(cu().cuDevicePrimaryCtxRetain(&context_, 0));
  }

  // The primary context of device 1, retained (released by the test).
  CUcontext second_context() {
    CUcontext second = nullptr;
    EXPECT_CU(cu().cuDevicePrimaryCtxRetain(&second, 1));
    return second;
  }

  // Device memory of `bytes` in the current context.
  static CUdeviceptr device_memory(std::size_t bytes) {
    CUdeviceptr address = 0;
    EXPECT_CU(cu().cuMemAlloc(&address, bytes));
    return address;
  }

  static CUstream non_blocking_stream() {
    CUstream stream = nullptr;
    EXPECT_CU(cu().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    return stream;
  }

  CUcontext context_ = nullptr;
};

// ---------------------------------------------------------------- cuGetProcAddress

// "If the specified CUDA version is greater than or equal to the CUDA
// version in which the driver symbol was introduced, this API will return
// the function pointer"; below it, CUDA_SUCCESS without one.
TEST_F(FakeCudaRulesTest, ProcAddressHandsOutNothingBelowTheVersionThatIntroducedTheVariant) {
  const struct {
    const char* name;
    int since;
  } kIntroduced[] = {{"cuMemCreate", 10020},  {"cuMemAddressReserve", 10020}, {"cuMemAlloc", 3020},
                     {"cuMemcpyHtoD", 3020},  {"cuDevicePrimaryCtxRetain", 7000},
                     {"cuMemHostRegister", 6050}, {"cuGetProcAddress", 12000}, {"cuCtxPushCurrent", 4000}};
  for (const auto& entry : kIntroduced) {
    const Resolved before = query(entry.name, entry.since - 10, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    EXPECT_EQ(before.result, CUDA_SUCCESS) << entry.name;
    EXPECT_EQ(before.function, nullptr) << entry.name;
    EXPECT_EQ(before.status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) << entry.name;
    const Resolved from = query(entry.name, entry.since, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    EXPECT_EQ(from.result, CUDA_SUCCESS) << entry.name;
    EXPECT_NE(from.function, nullptr) << entry.name;
    EXPECT_EQ(from.status, CU_GET_PROC_ADDRESS_SUCCESS) << entry.name;
  }
  const Resolved unknown = query("cuNoSuchEntryPoint", CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
  EXPECT_EQ(unknown.result, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(unknown.status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

// "If the specified CUDA version is greater than the driver version, the API
// will return CUDA_ERROR_INVALID_VALUE"; so do flags other than the three.
TEST_F(FakeCudaRulesTest, ProcAddressRefusesAVersionAboveTheDriversAndUnknownFlags) {
  control().set_driver_version(12080);
  EXPECT_EQ(query("cuMemAlloc", 12090, CU_GET_PROC_ADDRESS_LEGACY_STREAM).result, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(query("cuMemAlloc", 12080, CU_GET_PROC_ADDRESS_LEGACY_STREAM).status, CU_GET_PROC_ADDRESS_SUCCESS);
  control().set_driver_version(CUDA_VERSION);
  for (cuuint64_t flags : {cuuint64_t{4}, cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}}) {
    const Resolved refused = query("cuMemAlloc", CUDA_VERSION, flags);
    EXPECT_EQ(refused.result, CUDA_ERROR_INVALID_VALUE) << flags;
    EXPECT_EQ(refused.function, nullptr) << flags;
  }
  for (cuuint64_t flags : {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
    EXPECT_EQ(query("cuMemAlloc", CUDA_VERSION, flags).status, CU_GET_PROC_ADDRESS_SUCCESS) << flags;
  }
}

// The per-thread variants (CUDA 7.0) of the entry points that take a
// stream come with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM; DEFAULT
// is the legacy one, as for code not compiled for per-thread streams.
TEST_F(FakeCudaRulesTest, ProcAddressHandsOutThePerThreadVariantOnlyWhenAskedFor) {
  const auto function = [](const char* name, cuuint64_t flags, int version) {
    return query(name, version, flags).function;
  };
  for (const char* name : {"cuMemcpyHtoD", "cuMemcpyDtoHAsync", "cuMemsetD8Async", "cuStreamSynchronize",
                           "cuEventRecord"}) {
    const void* legacy = function(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_VERSION);
    EXPECT_NE(function(name, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_VERSION), legacy) << name;
    EXPECT_EQ(function(name, CU_GET_PROC_ADDRESS_DEFAULT, CUDA_VERSION), legacy) << name;
    // Before 7.0 there is no per-thread variant: the legacy one instead.
    EXPECT_EQ(function(name, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, 6050),
              function(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM, 6050))
        << name;
  }
  EXPECT_EQ(function("cuMemAlloc", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, CUDA_VERSION),
            function("cuMemAlloc", CU_GET_PROC_ADDRESS_LEGACY_STREAM, CUDA_VERSION))
      << "no stream, one variant";
}

TEST_F(FakeCudaRulesTest, ProcAddressCountsTheFlagsEachEntryPointWasResolvedWith) {
  const auto count = [](cuuint64_t flags) { return control().resolved_with("cuMemFree", flags); };
  const std::uint64_t legacy = count(CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  const std::uint64_t per_thread_count = count(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  const std::uint64_t by_default = count(CU_GET_PROC_ADDRESS_DEFAULT);
  query("cuMemFree", CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  query("cuMemFree", CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  query("cuMemFree", CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  query("cuMemFree", CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
  query("cuMemFree", 3010, CU_GET_PROC_ADDRESS_DEFAULT);  // nothing handed out
  query("cuMemFree", CUDA_VERSION, 3);                    // refused
  EXPECT_EQ(count(CU_GET_PROC_ADDRESS_LEGACY_STREAM), legacy + 2);
  EXPECT_EQ(count(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), per_thread_count + 1);
  EXPECT_EQ(count(CU_GET_PROC_ADDRESS_DEFAULT), by_default + 1);
  EXPECT_EQ(count(3), 0u);
  EXPECT_EQ(control().resolved_with("cuNoSuchEntryPoint", CU_GET_PROC_ADDRESS_DEFAULT), 0u);
}

#if CUDA_VERSION >= 13000
// cuGetProcAddress hands out the newest variant at the version asked for:
// from 13000 on, cuCtxSynchronize and cuCtxGetDevice take a context. A
// caller that casts what it got for 13000 to the prototype without one
// passes garbage for it.
TEST_F(FakeCudaRulesTest, ProcAddressHandsOutTheNewestVariantAtTheVersionAskedFor) {
  const auto synchronize = cu().cuCtxSynchronize;  // 12000
  const auto synchronize_v2 =
      resolve<decltype(&::cuCtxSynchronize_v2)>("cuCtxSynchronize", CU_GET_PROC_ADDRESS_LEGACY_STREAM, 13000);
  ASSERT_NE(synchronize_v2, nullptr);
  EXPECT_NE(reinterpret_cast<void*>(synchronize_v2), reinterpret_cast<void*>(synchronize));
  EXPECT_CU(synchronize());
  EXPECT_CU(synchronize_v2(nullptr));
  EXPECT_CU(synchronize_v2(context_));
  int not_a_context = 0;
  EXPECT_EQ(synchronize_v2(reinterpret_cast<CUcontext>(&not_a_context)), CUDA_ERROR_INVALID_CONTEXT);

  const auto get_device_v2 =
      resolve<decltype(&::cuCtxGetDevice_v2)>("cuCtxGetDevice", CU_GET_PROC_ADDRESS_LEGACY_STREAM, 13000);
  ASSERT_NE(get_device_v2, nullptr);
  CUdevice device = -1;
  EXPECT_CU(get_device_v2(&device, context_));
  EXPECT_EQ(device, 0);
  EXPECT_EQ(get_device_v2(&device, reinterpret_cast<CUcontext>(&not_a_context)), CUDA_ERROR_INVALID_CONTEXT);
}
#endif

// ---------------------------------------------------------------- per-thread default streams

// The per-thread variants' null stream is the calling thread's per-thread
// default stream (CU_STREAM_PER_THREAD in either variant), not the legacy
// one: a failure on it (memory freed under a copy) shows there only.
TEST_F(FakeCudaRulesTest, ThePerThreadVariantsNullStreamIsTheThreadsDefaultStream) {
  const CUdeviceptr target = device_memory(kMiB);
  const CUdeviceptr source = device_memory(kMiB);
  control().hold_streams(1);
  EXPECT_CU(per_thread().cuMemcpyDtoDAsync(target, source, kMiB, nullptr));
  EXPECT_CU(cu().cuMemFree(source));
  control().hold_streams(0);
  EXPECT_EQ(per_thread().cuStreamSynchronize(nullptr), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu().cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_CU(cu().cuStreamSynchronize(nullptr)) << "the legacy stream had the failure";
  EXPECT_CU(per_thread().cuStreamSynchronize(CU_STREAM_LEGACY)) << "the legacy stream had the failure";
  CUresult other_thread = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    if (cu().cuCtxSetCurrent(context_) == CUDA_SUCCESS) other_thread = per_thread().cuStreamSynchronize(nullptr);
    cu().cuCtxSetCurrent(nullptr);
  }).join();
  EXPECT_CU(other_thread) << "another thread's per-thread stream had the failure";
  EXPECT_EQ(counters().async_failures, 1u);
  EXPECT_CU(cu().cuMemFree(target));
}

// cuMemcpyDtoH waits for the null stream of its variant only.
TEST_F(FakeCudaRulesTest, SynchronousCopiesWaitForTheNullStreamOfTheirVariant) {
  const CUdeviceptr buffer = device_memory(4096);
  std::vector<unsigned char> host(4096, 1);
  control().hold_streams(1);
  EXPECT_CU(per_thread().cuMemsetD8Async(buffer, 0x5a, 4096, nullptr));
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), buffer, 4096)) << "waits for the legacy stream, which has no work";
  EXPECT_EQ(host, std::vector<unsigned char>(4096, 0)) << "the fill on the per-thread stream ran while held";
  control().hold_streams(0);
  EXPECT_CU(per_thread().cuMemcpyDtoH(host.data(), buffer, 4096));
  EXPECT_EQ(host, std::vector<unsigned char>(4096, 0x5a)) << "the per-thread copy did not wait for the fill";
  EXPECT_CU(cu().cuMemFree(buffer));
}

// ---------------------------------------------------------------- several devices

TEST_F(FakeCudaRulesTest, EachDeviceHasItsPrimaryContext) {
  int count = 0;
  EXPECT_CU(cu().cuDeviceGetCount(&count));
  EXPECT_EQ(count, 1);
  EXPECT_EQ(control().set_device_count(2), -1) << "changed while a context is retained";
  ASSERT_NO_FATAL_FAILURE(use_devices(3));
  EXPECT_EQ(control().set_device_count(0), -1);
  EXPECT_EQ(control().set_device_count(9), -1);
  EXPECT_EQ(control().set_device_count(3), 0) << "no change";
  EXPECT_CU(cu().cuDeviceGetCount(&count));
  EXPECT_EQ(count, 3);
  for (int ordinal = 0; ordinal < 3; ++ordinal) {
    CUdevice device = -1;
    EXPECT_CU(cu().cuDeviceGet(&device, ordinal));
    EXPECT_EQ(device, ordinal);
    char name[64] = {};
    EXPECT_CU(cu().cuDeviceGetName(name, sizeof name, device));
    EXPECT_EQ(std::string(name), "Resurgo fake CUDA device " + std::to_string(ordinal));
  }
  CUdevice device = -1;
  CUcontext context = nullptr;
  unsigned int flags = 1;
  int active = -1;
  char name[64];
  EXPECT_EQ(cu().cuDeviceGet(&device, 3), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu().cuDeviceGetName(name, sizeof name, 3), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu().cuDevicePrimaryCtxRetain(&context, 3), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu().cuDevicePrimaryCtxRelease(3), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu().cuDevicePrimaryCtxGetState(3, &flags, &active), CUDA_ERROR_INVALID_DEVICE);

  EXPECT_CU(cu().cuDevicePrimaryCtxGetState(2, &flags, &active));
  EXPECT_EQ(active, 0);
  CUcontext third = nullptr;
  ASSERT_CU(cu().cuDevicePrimaryCtxRetain(&third, 2));
  EXPECT_NE(third, context_);
  EXPECT_CU(cu().cuDevicePrimaryCtxGetState(2, &flags, &active));
  EXPECT_EQ(flags, 0u);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(counters().context_references, 2u) << "references of every device count";

  EXPECT_CU(cu().cuCtxSetCurrent(third));
  EXPECT_CU(cu().cuCtxGetCurrent(&context));
  EXPECT_EQ(context, third);
  EXPECT_CU(cu().cuCtxGetDevice(&device));
  EXPECT_EQ(device, 2);
  EXPECT_CU(cu().cuCtxPushCurrent(context_));
  EXPECT_CU(cu().cuCtxGetDevice(&device));
  EXPECT_EQ(device, 0);
  EXPECT_CU(cu().cuCtxPopCurrent(&context));
  EXPECT_CU(cu().cuCtxGetDevice(&device));
  EXPECT_EQ(device, 2);

  EXPECT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(2));
  EXPECT_CU(cu().cuDevicePrimaryCtxGetState(2, &flags, &active));
  EXPECT_EQ(active, 0);
  EXPECT_EQ(cu().cuCtxSetCurrent(third), CUDA_ERROR_INVALID_CONTEXT) << "released";
}

TEST_F(FakeCudaRulesTest, AThreadWithoutAContextHasNoCurrentDevice) {
  CUresult get_current = CUDA_ERROR_UNKNOWN, get_device = CUDA_SUCCESS, synchronize = CUDA_SUCCESS;
  CUcontext current = context_;
  std::thread([&] {
    get_current = cu().cuCtxGetCurrent(&current);
    CUdevice device = -1;
    get_device = cu().cuCtxGetDevice(&device);
    synchronize = cu().cuCtxSynchronize();
  }).join();
  EXPECT_CU(get_current);
  EXPECT_EQ(current, nullptr);
  EXPECT_EQ(get_device, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(synchronize, CUDA_ERROR_INVALID_CONTEXT);
}

// CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: the current context's device for
// cuMemAlloc, cuMemAllocManaged, cuMemHostAlloc and registrations; the
// location of the physical memory for a VMM mapping.
TEST_F(FakeCudaRulesTest, MemoryRemembersItsDevice) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  const auto ordinal = [](CUdeviceptr pointer) {
    int device = -1;
    const CUresult result = cu().cuPointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
    return result == CUDA_SUCCESS ? device : -static_cast<int>(result);
  };
  HostPages registered(4096);
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  const CUdeviceptr on_second = device_memory(4096);
  CUdeviceptr managed = 0;
  EXPECT_CU(cu().cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
  void* pinned = nullptr;
  EXPECT_CU(cu().cuMemHostAlloc(&pinned, 4096, 0));
  EXPECT_CU(cu().cuMemHostRegister(registered.data(), 4096, 0));
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  const CUdeviceptr on_first = device_memory(4096);
  EXPECT_EQ(ordinal(on_first), 0);
  EXPECT_EQ(ordinal(on_second), 1);
  EXPECT_EQ(ordinal(managed), 1);
  EXPECT_EQ(ordinal(reinterpret_cast<CUdeviceptr>(pinned)), 1);
  EXPECT_EQ(ordinal(reinterpret_cast<CUdeviceptr>(registered.data())), 1);
  unsigned int type = 0;
  EXPECT_CU(cu().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, on_second));
  EXPECT_EQ(type, static_cast<unsigned int>(CU_MEMORYTYPE_DEVICE));

  CUmemAllocationProp properties = {};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 2;
  CUmemGenericAllocationHandle physical = 0;
  EXPECT_EQ(cu().cuMemCreate(&physical, 2 * kMiB, &properties, 0), CUDA_ERROR_INVALID_DEVICE) << "one past the count";
  properties.location.id = 1;
  ASSERT_CU(cu().cuMemCreate(&physical, 2 * kMiB, &properties, 0));
  CUdeviceptr reserved = 0;
  ASSERT_CU(cu().cuMemAddressReserve(&reserved, 2 * kMiB, 0, 0, 0));
  EXPECT_CU(cu().cuMemMap(reserved, 2 * kMiB, 0, physical, 0));
  const CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU(cu().cuMemSetAccess(reserved, 2 * kMiB, &access, 1));
  EXPECT_EQ(ordinal(reserved + 4096), 1) << "the device of the physical memory";

  EXPECT_CU(cu().cuMemUnmap(reserved, 2 * kMiB));
  EXPECT_CU(cu().cuMemRelease(physical));
  EXPECT_CU(cu().cuMemAddressFree(reserved, 2 * kMiB));
  for (CUdeviceptr pointer : {on_first, on_second, managed}) EXPECT_CU(cu().cuMemFree(pointer));
  EXPECT_CU(cu().cuMemFreeHost(pinned));
  EXPECT_CU(cu().cuMemHostUnregister(registered.data()));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// cuMemSetAccess gives access per device; a copy needs it for the device
// that runs it.
TEST_F(FakeCudaRulesTest, VmmAccessIsGivenPerDevice) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  CUmemAllocationProp properties = {};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 0;
  CUmemGenericAllocationHandle physical = 0;
  ASSERT_CU(cu().cuMemCreate(&physical, 2 * kMiB, &properties, 0));
  CUdeviceptr cache = 0;
  ASSERT_CU(cu().cuMemAddressReserve(&cache, 2 * kMiB, 0, 0, 0));
  ASSERT_CU(cu().cuMemMap(cache, 2 * kMiB, 0, physical, 0));
  CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_CU(cu().cuMemSetAccess(cache, 2 * kMiB, &access, 1));
  std::vector<unsigned char> host(4096);
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), cache, host.size()));

  ASSERT_CU(cu().cuCtxSetCurrent(second));
  EXPECT_EQ(cu().cuMemcpyDtoH(host.data(), cache, host.size()), CUDA_ERROR_INVALID_VALUE) << "no access for device 1";
  access.location.id = 2;
  EXPECT_EQ(cu().cuMemSetAccess(cache, 2 * kMiB, &access, 1), CUDA_ERROR_INVALID_DEVICE);
  access.location.id = 1;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  EXPECT_CU(cu().cuMemSetAccess(cache, 2 * kMiB, &access, 1));
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), cache, host.size()));
  EXPECT_EQ(cu().cuMemsetD8Async(cache, 1, 4096, nullptr), CUDA_ERROR_INVALID_VALUE) << "read only for device 1";
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_CU(cu().cuMemSetAccess(cache, 2 * kMiB, &access, 1));
  EXPECT_CU(cu().cuMemsetD8Async(cache, 1, 4096, nullptr));
  EXPECT_CU(cu().cuCtxSynchronize());

  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuMemUnmap(cache, 2 * kMiB));
  EXPECT_CU(cu().cuMemRelease(physical));
  EXPECT_CU(cu().cuMemAddressFree(cache, 2 * kMiB));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// Unified addressing: memory of one device is copied from another's context.
TEST_F(FakeCudaRulesTest, DeviceMemoryOfAnotherDeviceIsUsableInCopies) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  const CUdeviceptr on_second = device_memory(4096);
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  const CUdeviceptr on_first = device_memory(4096);
  const std::vector<unsigned char> bytes(4096, 0x3c);
  EXPECT_CU(cu().cuMemcpyHtoD(on_second, bytes.data(), bytes.size()));
  EXPECT_CU(cu().cuMemcpyDtoDAsync(on_first, on_second, bytes.size(), nullptr));
  std::vector<unsigned char> back(4096);
  EXPECT_CU(cu().cuMemcpyDtoH(back.data(), on_first, back.size()));
  EXPECT_EQ(back, bytes);
  for (CUdeviceptr pointer : {on_first, on_second}) EXPECT_CU(cu().cuMemFree(pointer));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

TEST_F(FakeCudaRulesTest, DeviceMemorySizeIsPerDevice) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  control().set_device_memory(4 * kMiB);
  const CUdeviceptr first = device_memory(3 * kMiB);
  CUdeviceptr more = 0;
  EXPECT_EQ(cu().cuMemAlloc(&more, 2 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  const CUdeviceptr on_second = device_memory(3 * kMiB);
  CUmemAllocationProp properties = {};
  properties.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  properties.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  properties.location.id = 1;
  CUmemGenericAllocationHandle physical = 0;
  EXPECT_EQ(cu().cuMemCreate(&physical, 2 * kMiB, &properties, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(counters().device_bytes, 6 * kMiB);
  EXPECT_CU(cu().cuMemFree(on_second));
  EXPECT_CU(cu().cuMemFree(first));
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// ---------------------------------------------------------------- streams and events of a context

// Documented: a copy may go to another context's stream; cuEventRecord
// wants the event and the stream of one context; cuEventSynchronize takes
// any event; cuEventElapsedTime fails for events of two devices. Not
// documented, refused: synchronising or destroying another context's
// stream, destroying its event.
TEST_F(FakeCudaRulesTest, StreamsAndEventsBelongToTheContextTheyWereCreatedIn) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  const CUdeviceptr buffer = device_memory(4096);
  const CUstream first_stream = non_blocking_stream();
  CUevent first_event = nullptr, second_event = nullptr;
  EXPECT_CU(cu().cuEventCreate(&first_event, CU_EVENT_DEFAULT));
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  const CUstream second_stream = non_blocking_stream();
  EXPECT_CU(cu().cuEventCreate(&second_event, CU_EVENT_DEFAULT));

  EXPECT_EQ(cu().cuStreamSynchronize(first_stream), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu().cuStreamDestroy(first_stream), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu().cuEventDestroy(first_event), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu().cuEventRecord(first_event, second_stream), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu().cuEventRecord(first_event, nullptr), CUDA_ERROR_INVALID_HANDLE) << "the null stream is device 1's";
  EXPECT_CU(cu().cuEventRecord(first_event, first_stream));
  EXPECT_CU(cu().cuMemsetD8Async(buffer, 7, 4096, first_stream));
  EXPECT_CU(cu().cuEventSynchronize(first_event));
  EXPECT_CU(cu().cuEventRecord(second_event, second_stream));
  EXPECT_CU(cu().cuEventSynchronize(second_event));
  float milliseconds = 0;
  EXPECT_EQ(cu().cuEventElapsedTime(&milliseconds, first_event, second_event), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_CU(cu().cuStreamDestroy(second_stream));
  EXPECT_CU(cu().cuEventDestroy(second_event));

  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuStreamSynchronize(first_stream));
  std::vector<unsigned char> host(4096);
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), buffer, host.size()));
  EXPECT_EQ(host, std::vector<unsigned char>(4096, 7));
  EXPECT_CU(cu().cuStreamDestroy(first_stream));
  EXPECT_CU(cu().cuEventDestroy(first_event));
  EXPECT_CU(cu().cuMemFree(buffer));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// A failure on device 0's null stream (memory freed under a copy) is not
// device 1's.
TEST_F(FakeCudaRulesTest, EachContextHasItsOwnLegacyNullStream) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  const CUdeviceptr target = device_memory(kMiB);
  const CUdeviceptr source = device_memory(kMiB);
  control().hold_streams(1);
  EXPECT_CU(cu().cuMemcpyDtoDAsync(target, source, kMiB, nullptr));
  EXPECT_CU(cu().cuMemFree(source));
  control().hold_streams(0);
  EXPECT_EQ(cu().cuStreamSynchronize(nullptr), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cu().cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  EXPECT_CU(cu().cuStreamSynchronize(nullptr));
  EXPECT_CU(cu().cuStreamSynchronize(CU_STREAM_LEGACY));
  EXPECT_CU(cu().cuCtxSynchronize());
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuMemFree(target));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// cuCtxSynchronize waits for the null stream and the streams created in
// the current context, and for no other context's. Held streams make both
// visible; a future keeps a wrong wait from hanging the test.
TEST_F(FakeCudaRulesTest, CtxSynchronizeWaitsForEveryStreamOfTheCurrentContextOnly) {
  ASSERT_NO_FATAL_FAILURE(use_devices(2));
  const CUcontext second = second_context();
  CUdeviceptr managed = 0;
  ASSERT_CU(cu().cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
  const CUstream first_stream = non_blocking_stream();
  ASSERT_CU(cu().cuCtxSetCurrent(second));
  const CUstream second_stream = non_blocking_stream();
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  const auto synchronize_in = [](CUcontext context) {
    return std::async(std::launch::async, [context] {
      if (const CUresult set = cu().cuCtxSetCurrent(context); set != CUDA_SUCCESS) return set;
      const CUresult result = cu().cuCtxSynchronize();
      cu().cuCtxSetCurrent(nullptr);
      return result;
    });
  };

  const CUdeviceptr elsewhere = device_memory(4096);
  control().hold_streams(1);
  EXPECT_CU(cu().cuMemsetD8Async(elsewhere, 9, 4096, second_stream));
  auto not_waiting = synchronize_in(context_);
  EXPECT_EQ(not_waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "device 0's cuCtxSynchronize waited for device 1's stream";
  EXPECT_CU(cu().cuMemsetD8Async(managed, 1, 2048, first_stream));
  EXPECT_CU(cu().cuMemsetD8Async(managed + 2048, 2, 2048, nullptr));
  auto own_streams = synchronize_in(context_);
  EXPECT_EQ(own_streams.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "cuCtxSynchronize returned while the context's streams were held";
  control().hold_streams(0);
  EXPECT_CU(not_waiting.get());
  EXPECT_CU(own_streams.get());
  const auto* bytes = reinterpret_cast<const unsigned char*>(managed);
  EXPECT_EQ(bytes_of(bytes, 2048), std::vector<unsigned char>(2048, 1));
  EXPECT_EQ(bytes_of(bytes + 2048, 2048), std::vector<unsigned char>(2048, 2));

  ASSERT_CU(cu().cuCtxSetCurrent(second));
  EXPECT_CU(cu().cuCtxSynchronize());
  EXPECT_CU(cu().cuStreamDestroy(second_stream));
  ASSERT_CU(cu().cuCtxSetCurrent(context_));
  EXPECT_CU(cu().cuStreamDestroy(first_stream));
  for (CUdeviceptr pointer : {managed, elsewhere}) EXPECT_CU(cu().cuMemFree(pointer));
  EXPECT_CU(cu().cuDevicePrimaryCtxRelease(1));
}

// ---------------------------------------------------------------- host registration

// "Memory regions spanning over allocations that are both registered and
// not registered with CUDA are not supported and will return
// CUDA_ERROR_INVALID_VALUE" (the cuMemcpy documentation), for each copy.
TEST_F(FakeCudaRulesTest, ACopyOverMemoryPartlyRegisteredIsRefused) {
  HostPages host(4 * kMiB);
  ASSERT_NE(host.data(), nullptr);
  const CUdeviceptr buffer = device_memory(4 * kMiB);
  const CUstream stream = non_blocking_stream();
  ASSERT_CU(cu().cuMemHostRegister(host.data(), 2 * kMiB, 0));
  unsigned char* across = host.data() + kMiB;
  EXPECT_EQ(cu().cuMemcpyDtoH(across, buffer, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu().cuMemcpyHtoD(buffer, across, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu().cuMemcpyDtoHAsync(across, buffer, 2 * kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu().cuMemcpyHtoDAsync(buffer, across, 2 * kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), buffer, 2 * kMiB)) << "all registered";
  EXPECT_CU(cu().cuMemcpyDtoH(host.data() + 2 * kMiB, buffer, 2 * kMiB)) << "all pageable";
  void* pinned = nullptr;
  ASSERT_CU(cu().cuMemHostAlloc(&pinned, 4096, 0));
  EXPECT_EQ(cu().cuMemcpyDtoH(pinned, buffer, 2 * 4096), CUDA_ERROR_INVALID_VALUE) << "past the pinned allocation";
  EXPECT_CU(cu().cuMemFreeHost(pinned));
  EXPECT_CU(cu().cuMemHostUnregister(host.data()));
  EXPECT_CU(cu().cuStreamDestroy(stream));
  EXPECT_CU(cu().cuMemFree(buffer));
}

// Undocumented: the fake refuses a span over two registrations that lie
// back to back unless told to accept it.
TEST_F(FakeCudaRulesTest, ACopyAcrossTwoRegistrationsIsRefusedUnlessAllowed) {
  HostPages host(4 * kMiB);
  ASSERT_NE(host.data(), nullptr);
  const CUdeviceptr buffer = device_memory(4 * kMiB);
  std::vector<unsigned char> bytes(2 * kMiB);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  EXPECT_CU(cu().cuMemcpyHtoD(buffer, bytes.data(), bytes.size()));
  const CUstream stream = non_blocking_stream();
  ASSERT_CU(cu().cuMemHostRegister(host.data(), 2 * kMiB, 0));
  ASSERT_CU(cu().cuMemHostRegister(host.data() + 2 * kMiB, 2 * kMiB, 0));
  unsigned char* across = host.data() + kMiB;
  EXPECT_EQ(cu().cuMemcpyDtoH(across, buffer, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu().cuMemcpyHtoDAsync(buffer, across, 2 * kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), buffer, 2 * kMiB)) << "the first registration alone";
  EXPECT_CU(cu().cuMemcpyDtoH(host.data() + 2 * kMiB, buffer, 2 * kMiB)) << "the second alone";
  control().set_copies_across_registrations(1);
  EXPECT_CU(cu().cuMemcpyDtoH(across, buffer, 2 * kMiB));
  EXPECT_EQ(bytes_of(across, 2 * kMiB), bytes);
  control().set_copies_across_registrations(0);
  EXPECT_EQ(cu().cuMemcpyDtoHAsync(across, buffer, 2 * kMiB, stream), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cu().cuMemHostUnregister(host.data()));
  EXPECT_CU(cu().cuMemHostUnregister(host.data() + 2 * kMiB));
  EXPECT_CU(cu().cuStreamDestroy(stream));
  EXPECT_CU(cu().cuMemFree(buffer));
}

TEST_F(FakeCudaRulesTest, HostRegistrationTakesTime) {
  const auto registering = [](std::size_t bytes) {
    HostPages host(bytes);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_CU(cu().cuMemHostRegister(host.data(), bytes, 0));
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_CU(cu().cuMemHostUnregister(host.data()));
    return took;
  };
  EXPECT_GE(registering(64 * kMiB), std::chrono::microseconds(7800)) << "64 MiB at the default 8 GiB/s";
  control().set_host_register_rate(64 * kMiB);
  EXPECT_GE(registering(8 * kMiB), std::chrono::milliseconds(124)) << "8 MiB at 64 MiB/s";
}

// A registration under way (held here) is not one yet: a copy into its
// range is a pageable copy, unregistering it fails, and a second
// registration overlapping it fails too.
TEST_F(FakeCudaRulesTest, ARegistrationUnderWayIsNotRegisteredYet) {
  HostPages host(4 * kMiB);
  ASSERT_NE(host.data(), nullptr);
  const CUdeviceptr buffer = device_memory(4 * kMiB);
  control().hold_host_register(0);
  CUresult registered = CUDA_ERROR_UNKNOWN;
  std::thread registrar([&] {
    if (cu().cuCtxSetCurrent(context_) == CUDA_SUCCESS) registered = cu().cuMemHostRegister(host.data(), 2 * kMiB, 0);
    cu().cuCtxSetCurrent(nullptr);
  });
  ASSERT_EQ(control().wait_host_register_waiting(1), 1u);
  EXPECT_EQ(control().host_register_waiting(), 1u);
  EXPECT_EQ(counters().registered_ranges, 0u);
  EXPECT_EQ(cu().cuMemHostRegister(host.data() + kMiB, 2 * kMiB, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cu().cuMemHostUnregister(host.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_CU(cu().cuMemcpyDtoH(host.data() + kMiB, buffer, 2 * kMiB)) << "pageable, all of it";
  control().release_host_register();
  registrar.join();
  EXPECT_CU(registered);
  EXPECT_EQ(control().host_register_waiting(), 0u);
  EXPECT_EQ(counters().registered_ranges, 1u);
  EXPECT_EQ(cu().cuMemcpyDtoH(host.data() + kMiB, buffer, 2 * kMiB), CUDA_ERROR_INVALID_VALUE) << "half registered";
  EXPECT_CU(cu().cuMemHostUnregister(host.data()));
  EXPECT_CU(cu().cuMemFree(buffer));
}

// A buffer registered in two pieces: while the second is held, the first
// alone is registered, and a copy over both is refused.
TEST_F(FakeCudaRulesTest, AHeldRegistrationLeavesTheFirstPieceAloneRegistered) {
  HostPages host(4 * kMiB);
  ASSERT_NE(host.data(), nullptr);
  const CUdeviceptr buffer = device_memory(4 * kMiB);
  control().hold_host_register(1);
  CUresult first = CUDA_ERROR_UNKNOWN, second = CUDA_ERROR_UNKNOWN;
  std::thread pinner([&] {
    if (cu().cuCtxSetCurrent(context_) != CUDA_SUCCESS) return;
    first = cu().cuMemHostRegister(host.data(), 2 * kMiB, 0);
    second = cu().cuMemHostRegister(host.data() + 2 * kMiB, 2 * kMiB, 0);
    cu().cuCtxSetCurrent(nullptr);
  });
  ASSERT_EQ(control().wait_host_register_waiting(1), 1u);
  EXPECT_EQ(counters().registered_ranges, 1u);
  EXPECT_EQ(cu().cuMemcpyDtoH(host.data() + kMiB, buffer, 2 * kMiB), CUDA_ERROR_INVALID_VALUE) << "half registered";
  EXPECT_CU(cu().cuMemcpyDtoH(host.data(), buffer, 2 * kMiB)) << "the registered piece";
  EXPECT_CU(cu().cuMemcpyDtoH(host.data() + 2 * kMiB, buffer, 2 * kMiB)) << "the piece not registered yet";
  control().release_host_register();
  pinner.join();
  EXPECT_CU(first);
  EXPECT_CU(second);
  EXPECT_EQ(cu().cuMemcpyDtoH(host.data() + kMiB, buffer, 2 * kMiB), CUDA_ERROR_INVALID_VALUE)
      << "across two registrations";
  EXPECT_CU(cu().cuMemHostUnregister(host.data()));
  EXPECT_CU(cu().cuMemHostUnregister(host.data() + 2 * kMiB));
  EXPECT_CU(cu().cuMemFree(buffer));
}

// ---------------------------------------------------------------- synchronous copies

// NVIDIA's "API synchronization behavior": from pageable memory,
// cuMemcpyHtoD returns once the bytes are staged, "but the DMA to final
// destination may not have completed"; from pinned memory it is
// synchronous. The copy delay stands for the DMA (300 ms for the staged
// copy, none for the reader).
TEST_F(FakeCudaRulesTest, APageableHostToDeviceCopyReturnsBeforeTheDeviceHasTheBytes) {
  const CUdeviceptr buffer = device_memory(kMiB);
  const CUstream reader = non_blocking_stream();
  std::vector<unsigned char> pageable(kMiB, 0x77);
  std::vector<unsigned char> read(kMiB, 0xee);
  control().set_copy_delay_us(300000);
  EXPECT_CU(cu().cuMemcpyHtoD(buffer, pageable.data(), kMiB));
  std::fill(pageable.begin(), pageable.end(), 0x11);  // staged: the copy has its bytes
  control().set_copy_delay_us(0);
  EXPECT_CU(cu().cuMemcpyDtoHAsync(read.data(), buffer, kMiB, reader));
  EXPECT_CU(cu().cuStreamSynchronize(reader));
  EXPECT_EQ(read, std::vector<unsigned char>(kMiB, 0)) << "the reader did not wait for the null stream";
  // The streams were not held; letting them go orders the read before the
  // staged write for ThreadSanitizer, which does not count the 300 ms.
  control().hold_streams(0);
  EXPECT_CU(cu().cuMemcpyDtoH(read.data(), buffer, kMiB)) << "waits for the null stream";
  EXPECT_EQ(read, std::vector<unsigned char>(kMiB, 0x77));

  HostPages pinned(kMiB);
  ASSERT_NE(pinned.data(), nullptr);
  std::fill(pinned.data(), pinned.data() + kMiB, 0x33);
  ASSERT_CU(cu().cuMemHostRegister(pinned.data(), kMiB, 0));
  control().set_copy_delay_us(300000);
  EXPECT_CU(cu().cuMemcpyHtoD(buffer, pinned.data(), kMiB));
  control().set_copy_delay_us(0);
  EXPECT_CU(cu().cuMemcpyDtoHAsync(read.data(), buffer, kMiB, reader));
  EXPECT_CU(cu().cuStreamSynchronize(reader));
  EXPECT_EQ(read, std::vector<unsigned char>(kMiB, 0x33)) << "from pinned memory the copy is synchronous";

  EXPECT_CU(cu().cuMemHostUnregister(pinned.data()));
  EXPECT_CU(cu().cuStreamDestroy(reader));
  EXPECT_CU(cu().cuMemFree(buffer));
}

// ---------------------------------------------------------------- failure injection

TEST_F(FakeCudaRulesTest, TheNewEntryPointsTakeInjectedFailures) {
  CUdevice device = -1;
  CUcontext context = nullptr;
  unsigned int flags = 0;
  int value = 0;
  const struct {
    const char* name;
    std::function<CUresult()> call;
  } kCalls[] = {
      {"cuDeviceGetCount", [&] { return cu().cuDeviceGetCount(&value); }},
      {"cuCtxGetCurrent", [&] { return cu().cuCtxGetCurrent(&context); }},
      {"cuCtxGetDevice", [&] { return cu().cuCtxGetDevice(&device); }},
      {"cuDevicePrimaryCtxGetState", [&] { return cu().cuDevicePrimaryCtxGetState(0, &flags, &value); }},
      {"cuCtxSynchronize", [&] { return cu().cuCtxSynchronize(); }},
  };
  for (const auto& entry : kCalls) {
    ASSERT_EQ(control().fail(entry.name, 0, CUDA_ERROR_ECC_UNCORRECTABLE, 1), 0) << entry.name;
    EXPECT_EQ(entry.call(), CUDA_ERROR_ECC_UNCORRECTABLE) << entry.name;
    EXPECT_CU(entry.call()) << entry.name;
    EXPECT_EQ(control().calls(entry.name), 2u) << entry.name;
  }
  EXPECT_EQ(control().fail("cuCtxSynchronize_v2", 0, CUDA_ERROR_UNKNOWN, 1), -1) << "base names only";
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
