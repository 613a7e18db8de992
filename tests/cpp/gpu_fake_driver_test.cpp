// The CUDA code of src/gpu against the fake CUDA driver (tests/cpp/fake_cuda):
// failures injected where a GPU fails (out of device memory while the L0
// cache grows, a mapping refused, host registration refused, a copy failing
// during a checkpoint), the Store end to end with backend cuda, and the
// driver misuse the fake catches as a real driver would. The suite runs
// where libcuda.so.1 is the fake (the fake_cuda.* ctest registration puts it
// on LD_LIBRARY_PATH) and skips elsewhere, saying why.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/units.h"
#include "cuda_calls.h"
#include "fake_cuda_lookup.h"
#include "cuda_device_buffer.h"
#include "gpu/cuda_device_access.h"
#include "gpu/cuda_driver.h"
#include "gpu/cuda_host_pinner.h"
#include "gpu/cuda_vmm_memory.h"
#include "gpu/device_cache.h"
#include "gpu/late_pin_buffer.h"
#include "capture/device_staging.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

std::string device_name(int ordinal) {
  char name[256] = {};
  cuda().check(cuda().cuDeviceGetName(name, sizeof name, ordinal), "cuDeviceGetName", "test");
  return name;
}

using DeviceBuffer = testing::CudaDeviceBuffer;

// Each test starts with the fake's defaults and must leave nothing behind:
// no allocation, mapping, registration, stream, event or context reference,
// and no stream operation that failed. The test thread has the primary
// context current, as the application's runtime would make it.
class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    ASSERT_TRUE(driver().available()) << "the fake driver is loaded but unusable: " << driver().why_unavailable();
    FakeCudaCounters before = {};
    ASSERT_EQ(control().reset(&before), 0u) << "left by an earlier test: " << describe(before);
    check(driver().cuDevicePrimaryCtxRetain(&context_, 0), "cuDevicePrimaryCtxRetain");
    check(driver().cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  }

  void TearDown() override {
    if (!fake().control) return;
    if (context_ != nullptr) driver().cuDevicePrimaryCtxRelease(0);
    for (int ordinal = 0; ordinal < static_cast<int>(devices_.size()); ++ordinal) {
      if (devices_[ordinal] != nullptr) driver().cuDevicePrimaryCtxRelease(ordinal);
    }
    driver().cuCtxSetCurrent(nullptr);
    FakeCudaCounters left = {};
    EXPECT_EQ(control().reset(&left), 0u) << "leaked: " << describe(left);
    EXPECT_EQ(left.device_bytes, 0u);
    EXPECT_EQ(left.registered_bytes, 0u);
    EXPECT_EQ(left.async_failures, expected_async_failures_) << "stream operations failed (memory freed under them)";
  }

  static const CudaDriver& driver() { return cuda(); }
  static const FakeControl& control() { return *fake().control; }

  // Two devices, each primary context retained (released at TearDown);
  // the test's own context on device 0 is given back first (the fake
  // changes the device count only while no context is retained).
  std::array<CUcontext, 2> two_devices() {
    check(driver().cuDevicePrimaryCtxRelease(0), "cuDevicePrimaryCtxRelease");
    context_ = nullptr;
    EXPECT_EQ(control().set_device_count(2), 0);
    for (int ordinal : {0, 1}) check(driver().cuDevicePrimaryCtxRetain(&devices_[ordinal], ordinal), "retain");
    return devices_;
  }
  static FakeCudaCounters counters() {
    FakeCudaCounters now = {};
    control().counters(&now);
    return now;
  }

  // A device cache over CUDA VMM of `capacity_granules` granules, mapped
  // `chunk_granules` at a time; returns once it stopped growing.
  std::unique_ptr<DeviceCache> open_cache(std::size_t capacity_granules, std::size_t chunk_granules) {
    auto memory = std::make_unique<CudaVmmMemory>(0);
    granularity_ = memory->granularity();
    DeviceCacheOptions options;
    options.capacity = capacity_granules * granularity_;
    options.chunk = chunk_granules * granularity_;
    auto cache = std::make_unique<DeviceCache>(std::move(memory), options, log_);
    cache->wait_growth_done();
    return cache;
  }

  // A version of `bytes` from `source` in `cache`, read back to host memory.
  std::vector<unsigned char> cache_and_read(DeviceCache& cache, std::int64_t version, const DeviceBuffer& source,
                                            std::size_t bytes) {
    EXPECT_EQ(cache.capture(version, {{source.get(), bytes}}).status, CaptureResult::Status::kCached);
    std::vector<unsigned char> back(bytes);
    cache.read(version, 0, back.data(), bytes);
    return back;
  }

  Config store_config(const std::string& capacity, const std::map<std::string, std::string>& more = {}) {
    return cuda_store_config(dir_.path(), capacity, more);
  }

  CUcontext context_ = nullptr;
  std::array<CUcontext, 2> devices_ = {};
  std::size_t granularity_ = 0;
  std::uint64_t expected_async_failures_ = 0;
  Logger log_{"fake-cuda-test", LogLevel::kOff};
  TempDir dir_;
};

// ---------------------------------------------------------------- the driver itself

TEST_F(FakeCudaTest, TheLoaderResolvesEveryEntryPointAndCallsNeedAContext) {
  EXPECT_EQ(driver().version(), CUDA_VERSION);
  EXPECT_NE(CudaVmmMemory(0).name().find("Resurgo fake CUDA device"), std::string::npos);

  // A thread of its own has no current context until it sets one.
  CUresult without = CUDA_SUCCESS, with = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    CUdeviceptr pointer = 0;
    without = driver().cuMemAlloc(&pointer, 4096);
    if (driver().cuCtxSetCurrent(context_) != CUDA_SUCCESS) return;
    with = driver().cuMemAlloc(&pointer, 4096);
    if (with == CUDA_SUCCESS) driver().cuMemFree(pointer);
  }).join();
  EXPECT_EQ(without, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(with, CUDA_SUCCESS);

  // An unbalanced release is refused; the released context is no longer current anywhere.
  check(driver().cuDevicePrimaryCtxRelease(0), "cuDevicePrimaryCtxRelease");
  EXPECT_EQ(driver().cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
  CUstream stream = nullptr;
  EXPECT_EQ(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  check(driver().cuDevicePrimaryCtxRetain(&context_, 0), "cuDevicePrimaryCtxRetain");
  EXPECT_EQ(driver().describe(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
            "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: part or all of the requested memory range is already mapped");
}

TEST_F(FakeCudaTest, TheLoaderSaysWhyADriverIsUnusable) {
  control().set_driver_version(11080);
  EXPECT_EQ(CudaDriver("libcuda.so.1").why_unavailable(), "libcuda.so.1 reports CUDA 11.8; CUDA 12.0 or newer is needed");
  control().set_driver_version(CUDA_VERSION);

  // The sixth entry point of RESURGO_CUDA_ENTRY_POINTS is not found.
  ASSERT_EQ(control().fail("cuGetProcAddress", 5, CUDA_ERROR_NOT_FOUND, 1), 0);
  EXPECT_EQ(CudaDriver("libcuda.so.1").why_unavailable(), "libcuda.so.1 lacks entry points: cuDeviceGetName");

  ASSERT_EQ(control().fail("cuInit", 0, CUDA_ERROR_NO_DEVICE, 1), 0);
  const CudaDriver without_device("libcuda.so.1");
  EXPECT_EQ(without_device.why_unavailable(), "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected");
  EXPECT_THROW(CudaVmmMemory(0, without_device), GpuError);
  EXPECT_EQ(control().fail("cuNoSuchEntryPoint", 0, CUDA_ERROR_UNKNOWN, 1), -1);
}

// What a GPU would fault on, the fake refuses when the copy is enqueued.
TEST_F(FakeCudaTest, CopiesIntoUnmappedCacheMemoryAreRefused) {
  CudaVmmMemory memory(0);
  const std::size_t granularity = memory.granularity();
  memory.reserve(4 * granularity);
  ASSERT_EQ(memory.map(0, granularity), MapResult::kMapped);
  DeviceBuffer source(2 * granularity);
  source.upload(random_bytes<unsigned char>(2 * granularity, 1));
  memory.copy_in(0, source.get(), granularity);
  memory.wait_copies_in();
  for (std::size_t offset : {granularity - 256, 2 * granularity}) {  // across the mapped end, wholly outside
    try {
      memory.copy_in(offset, source.get(), 512);
      ADD_FAILURE() << "a copy to offset " << offset << " was accepted";
    } catch (const GpuError& error) {
      EXPECT_NE(std::string(error.what()).find("cuMemcpyDtoDAsync (512 bytes into the device cache at offset " +
                                               std::to_string(offset) + "): CUDA_ERROR_INVALID_VALUE"),
                std::string::npos)
          << error.what();
    }
  }
  std::vector<unsigned char> host(512);
  EXPECT_THROW(memory.copy_out(2 * granularity, host.data(), host.size()), GpuError);
  // The device address is not host memory: the host pointer side refuses it.
  EXPECT_EQ(driver().cuMemcpyDtoH(source.get(), source.address(), 16), CUDA_ERROR_INVALID_VALUE);
  // Only mapped and accessible cache memory is device memory.
  EXPECT_EQ(CudaDeviceAccess::describe(driver(), reinterpret_cast<void*>(memory.base())).kind, MemoryKind::kDevice);
  EXPECT_EQ(CudaDeviceAccess::describe(driver(), reinterpret_cast<void*>(memory.base() + granularity)).kind,
            MemoryKind::kHost);
}

TEST_F(FakeCudaTest, MemoryFreedUnderACopyInFlightFailsTheStream) {
  CUstream stream = nullptr;
  check(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  DeviceBuffer target(kMiB);
  CUdeviceptr source = 0;
  check(driver().cuMemAlloc(&source, kMiB), "cuMemAlloc");
  control().hold_streams(1);
  check(driver().cuMemcpyDtoDAsync(target.address(), source, kMiB, stream), "cuMemcpyDtoDAsync");
  check(driver().cuMemFree(source), "cuMemFree");
  control().hold_streams(0);
  EXPECT_EQ(driver().cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(driver().cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS) << "the error is sticky";
  check(driver().cuStreamDestroy(stream), "cuStreamDestroy");
  expected_async_failures_ = 1;
}

// Asynchronous copies run on the stream's worker: a caller that reads the
// target before cuStreamSynchronize finds the bytes it had (held streams
// make that point visible without timing).
TEST_F(FakeCudaTest, ACopyIsNotInTheTargetBeforeTheStreamIsSynchronised) {
  CUstream stream = nullptr;
  check(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  DeviceBuffer source(kMiB);
  source.upload(std::vector<unsigned char>(kMiB, 7));
  std::vector<unsigned char> host(kMiB, 0);
  control().hold_streams(1);
  check(driver().cuMemcpyDtoHAsync(host.data(), source.address(), kMiB, stream), "cuMemcpyDtoHAsync");
  EXPECT_EQ(host, std::vector<unsigned char>(kMiB, 0)) << "the copy ran before the stream did";
  control().hold_streams(0);
  check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  EXPECT_EQ(host, std::vector<unsigned char>(kMiB, 7));
  check(driver().cuStreamDestroy(stream), "cuStreamDestroy");
}

// An event completes when its stream reaches it; held streams make that
// point visible without timing.
TEST_F(FakeCudaTest, EventsCompleteWhenTheStreamReachesThem) {
  CUstream stream = nullptr;
  check(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUevent start = nullptr, end = nullptr, untimed = nullptr;
  check(driver().cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(driver().cuEventCreate(&end, CU_EVENT_DEFAULT), "cuEventCreate");
  check(driver().cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  float milliseconds = -1;
  EXPECT_EQ(driver().cuEventElapsedTime(&milliseconds, start, end), CUDA_ERROR_INVALID_HANDLE) << "never recorded";

  DeviceBuffer buffer(kMiB);
  control().hold_streams(1);
  check(driver().cuEventRecord(start, stream), "cuEventRecord");
  check(driver().cuMemsetD8Async(buffer.address(), 0x3c, kMiB, stream), "cuMemsetD8Async");
  check(driver().cuEventRecord(end, stream), "cuEventRecord");
  check(driver().cuEventRecord(untimed, stream), "cuEventRecord");
  EXPECT_EQ(driver().cuEventElapsedTime(&milliseconds, start, end), CUDA_ERROR_NOT_READY);
  control().hold_streams(0);
  check(driver().cuEventSynchronize(end), "cuEventSynchronize");
  check(driver().cuEventElapsedTime(&milliseconds, start, end), "cuEventElapsedTime");
  EXPECT_GE(milliseconds, 0.0f);
  check(driver().cuEventSynchronize(untimed), "cuEventSynchronize");
  EXPECT_EQ(driver().cuEventElapsedTime(&milliseconds, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(buffer.download(), std::vector<unsigned char>(kMiB, 0x3c)) << "the fill ran before the end event";

  for (CUevent event : {start, end, untimed}) check(driver().cuEventDestroy(event), "cuEventDestroy");
  EXPECT_EQ(driver().cuEventDestroy(start), CUDA_ERROR_INVALID_HANDLE);
  check(driver().cuStreamDestroy(stream), "cuStreamDestroy");
}

TEST_F(FakeCudaTest, HostRegistrationIsCheckedLikeTheDriverDoes) {
  const std::size_t bytes = 4 * kMiB;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* base = static_cast<std::byte*>(memory);
  CudaHostPinner pinner(0);
  pinner.pin(base, 2 * kMiB);
  try {
    pinner.pin(base + kMiB, 2 * kMiB);  // overlaps
    ADD_FAILURE() << "an overlapping registration was accepted";
  } catch (const GpuError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("cuMemHostRegister (" + describe_pin_range(base + kMiB, 2 * kMiB) +
                        " of the host buffer): CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: part or all of the "
                        "requested memory range is already mapped"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(driver().cuMemHostUnregister(base + kMiB), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(counters().registered_bytes, 2 * kMiB);
  EXPECT_EQ(CudaDeviceAccess::describe(driver(), base).kind, MemoryKind::kHost);
  pinner.unpin(base, 2 * kMiB);
  EXPECT_EQ(driver().cuMemHostUnregister(base), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) << "unregistered twice";
  ASSERT_EQ(::munmap(base, bytes), 0);
  EXPECT_THROW(pinner.pin(base, kMiB), GpuError) << "unmapped memory cannot be pinned";
}

// ---------------------------------------------------------------- the L0 cache over VMM

TEST_F(FakeCudaTest, OutOfMemoryWhileMappingStopsGrowthAndTheCacheKeepsWorking) {
  ASSERT_EQ(control().fail("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY, -1), 0);
  std::unique_ptr<DeviceCache> cache = open_cache(8, 1);
  const DeviceCacheStats grown = cache->stats();
  EXPECT_TRUE(grown.growth_done);
  EXPECT_EQ(grown.growth_stopped, "out of memory");
  EXPECT_EQ(grown.capacity, 8 * granularity_);
  EXPECT_EQ(grown.mapped, 3 * granularity_);
  EXPECT_EQ(counters().physical_allocations, 3u);
  EXPECT_EQ(counters().mappings, 3u);

  const std::size_t fits = 3 * granularity_;
  DeviceBuffer source(fits + 4096);
  const std::vector<unsigned char> bytes = random_bytes<unsigned char>(fits + 4096, 2);
  source.upload(bytes);
  EXPECT_EQ(cache_and_read(*cache, 1, source, fits), std::vector<unsigned char>(bytes.begin(), bytes.begin() + fits));
  cache->flushed(1);
  EXPECT_EQ(cache_and_read(*cache, 2, source, fits - 12345),
            std::vector<unsigned char>(bytes.begin(), bytes.begin() + fits - 12345));
  EXPECT_EQ(cache->stats().evicted, 1u);
  // Larger than what could be mapped: bypasses, though the capacity is larger.
  EXPECT_EQ(cache->capture(3, {{source.get(), fits + 4096}}).status, CaptureResult::Status::kTooLarge);
  EXPECT_EQ(cache->stats().bypassed, 1u);
}

// cuMemAlloc and cuMemCreate share the device memory.
TEST_F(FakeCudaTest, TheCacheGrowsIntoTheDeviceMemoryTheApplicationLeft) {
  const std::size_t granularity = CudaVmmMemory(0).granularity();
  control().set_device_memory(5 * granularity);
  DeviceBuffer application(2 * granularity);
  {
    std::unique_ptr<DeviceCache> cache = open_cache(8, 2);
    EXPECT_EQ(cache->stats().mapped, 2 * granularity);
    EXPECT_EQ(cache->stats().growth_stopped, "out of memory");
    EXPECT_EQ(counters().device_bytes, 4 * granularity);
    CUdeviceptr more = 0;
    EXPECT_EQ(driver().cuMemAlloc(&more, 2 * granularity), CUDA_ERROR_OUT_OF_MEMORY);
  }
  EXPECT_EQ(counters().device_bytes, 2 * granularity) << "the cache gave its memory back";
}

TEST_F(FakeCudaTest, AMappingErrorIsReportedWithTheCallAndTheCudaString) {
  ASSERT_EQ(control().fail("cuMemMap", 1, CUDA_ERROR_INVALID_VALUE, 1), 0);
  std::unique_ptr<DeviceCache> cache = open_cache(4, 1);
  const DeviceCacheStats stats = cache->stats();
  EXPECT_EQ(stats.growth_stopped, "cuMemMap (" + std::to_string(granularity_) + " bytes at offset " +
                                      std::to_string(granularity_) + " of the device cache on device 0: " +
                                      device_name(0) + "): CUDA_ERROR_INVALID_VALUE: invalid argument");
  EXPECT_EQ(stats.mapped, granularity_);
  EXPECT_EQ(counters().physical_allocations, 1u) << "the chunk that could not be mapped was released";
  EXPECT_EQ(control().calls("cuMemRelease"), 1u);
  DeviceBuffer source(granularity_);
  const std::vector<unsigned char> bytes = random_bytes<unsigned char>(granularity_, 3);
  source.upload(bytes);
  EXPECT_EQ(cache_and_read(*cache, 1, source, granularity_), bytes);
}

// A chunk mapped but never made accessible is no cache memory, and is given
// back with the cache.
TEST_F(FakeCudaTest, AnAccessErrorStopsGrowthAndTheChunkIsGivenBack) {
  ASSERT_EQ(control().fail("cuMemSetAccess", 0, CUDA_ERROR_ECC_UNCORRECTABLE, 1), 0);
  std::unique_ptr<DeviceCache> cache = open_cache(2, 1);
  EXPECT_EQ(cache->stats().growth_stopped.rfind("cuMemSetAccess (", 0), 0u) << cache->stats().growth_stopped;
  EXPECT_NE(cache->stats().growth_stopped.find("CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered"),
            std::string::npos);
  EXPECT_EQ(cache->stats().mapped, 0u);
  EXPECT_EQ(counters().mappings, 1u);
  DeviceBuffer source(4096);
  EXPECT_EQ(cache->capture(1, {{source.get(), 4096}}).status, CaptureResult::Status::kTooLarge);
  cache.reset();
  EXPECT_EQ(counters().mappings, 0u);
  EXPECT_EQ(counters().physical_allocations, 0u);
}

TEST_F(FakeCudaTest, AFailingStreamCreateLeaksNothing) {
  ASSERT_EQ(control().fail("cuStreamCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, 1), 0);
  try {
    CudaVmmMemory memory(0);
    ADD_FAILURE() << "no error";
  } catch (const GpuError& error) {
    EXPECT_EQ(error.result(), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(std::string(error.what()).rfind("cuStreamCreate (device 0: " + device_name(0) + "): CUDA_ERROR_OUT_OF_MEMORY", 0), 0u)
        << error.what();
  }
  EXPECT_EQ(counters().streams, 0u);
  EXPECT_EQ(counters().context_references, 1u) << "only the test's own";
}

// The driver fails while the cache is given back (CUDA_ERROR_DEINITIALIZED
// when the process exits): the destructor goes on, it must not throw.
TEST_F(FakeCudaTest, ADriverFailingAtTeardownNeitherTerminatesNorLeaks) {
  std::unique_ptr<DeviceCache> cache = open_cache(2, 1);
  const std::uint64_t calls = control().calls("cuCtxPushCurrent");
  ASSERT_EQ(control().fail("cuCtxPushCurrent", 0, CUDA_ERROR_DEINITIALIZED, 1), 0);
  cache.reset();
  EXPECT_EQ(control().calls("cuCtxPushCurrent"), calls + 1) << "the failing call was made";
  EXPECT_EQ(counters().reservations, 0u) << "given back in the context the thread had";
}

// ---------------------------------------------------------------- host registration of the L1 buffer

// A buffer of two pieces: CudaHostPinner registers at most 1 GiB at a time.
LatePinOptions two_piece_buffer() {
  LatePinOptions options;
  options.capacity = CudaHostPinner::kMaxPiece + 2 * kMiB;
  options.pin = PinPolicy::kLazy;
  return options;
}

TEST_F(FakeCudaTest, ARegistrationFailureUnregistersThePiecesAndFlushesGoOnUnpinned) {
  ASSERT_EQ(control().fail("cuMemHostRegister", 1, CUDA_ERROR_NOT_PERMITTED, 1), 0);
  LatePinBuffer buffer(two_piece_buffer(), std::make_unique<CudaHostPinner>(0), log_);
  EXPECT_FALSE(buffer.wait_pinned());
  const LatePinStats stats = buffer.stats();
  EXPECT_EQ(stats.state, LatePinState::kPinFailed);
  EXPECT_EQ(stats.pin_failure, "cuMemHostRegister (" +
                                   describe_pin_range(buffer.data() + CudaHostPinner::kMaxPiece, 2 * kMiB) +
                                   " of the host buffer): CUDA_ERROR_NOT_PERMITTED: operation not permitted");
  EXPECT_EQ(stats.pin_pieces, 0u);
  EXPECT_EQ(control().calls("cuMemHostRegister"), 2u);
  EXPECT_EQ(control().calls("cuMemHostUnregister"), 1u) << "the first piece was given back";
  EXPECT_EQ(counters().registered_bytes, 0u);
  EXPECT_EQ(counters().registered_ranges, 0u);

  buffer.flush_begins(0, 4096);
  std::memset(buffer.data(), 0x7e, 4096);
  buffer.flush_ends(0, 4096);
  EXPECT_EQ(buffer.stats().flushes, 1u);
  EXPECT_EQ(buffer.data()[4095], std::byte{0x7e});
}

TEST_F(FakeCudaTest, TheBufferIsPinnedInPiecesWithinThePerCallLimit) {
  control().set_host_register_limit(CudaHostPinner::kMaxPiece);
  {
    LatePinBuffer buffer(two_piece_buffer(), std::make_unique<CudaHostPinner>(0), log_);
    EXPECT_TRUE(buffer.wait_pinned()) << buffer.stats().pin_failure;
    EXPECT_EQ(buffer.stats().pin_pieces, 2u);
    const FakeCudaCounters pinned = counters();
    EXPECT_EQ(pinned.registered_ranges, 2u);
    EXPECT_EQ(pinned.registered_bytes, buffer.capacity());
    EXPECT_EQ(pinned.largest_registration, CudaHostPinner::kMaxPiece);
  }
  EXPECT_EQ(counters().registered_bytes, 0u) << "unpinned with the buffer";
}

// The per-call ceiling of r580 drivers, below the pinner's piece.
TEST_F(FakeCudaTest, APieceAboveTheDriversCeilingFailsAsOutOfMemory) {
  control().set_host_register_limit(2 * kMiB);
  LatePinOptions options;
  options.capacity = 4 * kMiB;
  LatePinBuffer buffer(options, std::make_unique<CudaHostPinner>(0), log_);
  EXPECT_FALSE(buffer.wait_pinned());
  EXPECT_EQ(buffer.stats().pin_failure, "cuMemHostRegister (" + describe_pin_range(buffer.data(), 4 * kMiB) +
                                            " of the host buffer): CUDA_ERROR_OUT_OF_MEMORY: out of memory");
  EXPECT_EQ(counters().registered_ranges, 0u);
}

// ---------------------------------------------------------------- the Store with backend cuda

// Two device regions and a host region, three versions; `capacity` is L0's.
struct StoreRegions {
  static constexpr std::size_t kFirst = 3 * kMiB + 4097;
  static constexpr std::size_t kSecond = kMiB + 1;
  DeviceBuffer first{kFirst};
  DeviceBuffer second{kSecond};
  std::vector<unsigned char> host = std::vector<unsigned char>(64 * 1024);
  std::vector<std::vector<unsigned char>> first_versions, second_versions, host_versions;

  void protect(Store& store) {
    store.protect_device(0, first.get(), kFirst, "first");
    store.protect(1, host.data(), host.size(), "host");
    store.protect_device(2, second.get(), kSecond, "second");
  }
  void fill(int version) {
    first_versions.push_back(random_bytes<unsigned char>(kFirst, static_cast<unsigned>(10 * version)));
    second_versions.push_back(random_bytes<unsigned char>(kSecond, static_cast<unsigned>(10 * version + 1)));
    host_versions.push_back(random_bytes<unsigned char>(host.size(), static_cast<unsigned>(10 * version + 2)));
    first.upload(first_versions.back());
    second.upload(second_versions.back());
    host = host_versions.back();
  }
  // Versions 1 to `versions`, each filled then checkpointed; waits for them.
  void take(Store& store, int versions) {
    for (int version = 1; version <= versions; ++version) {
      fill(version);
      store.checkpoint(version);
    }
    store.wait();
  }
  void clobber() {
    first.upload(std::vector<unsigned char>(kFirst, 0));
    second.upload(std::vector<unsigned char>(kSecond, 0));
    std::fill(host.begin(), host.end(), 0);
  }
  // Clobbers the regions and restarts `version`, which L0 holds: its
  // device regions come from there, device to device.
  ::testing::AssertionResult restart_from_l0(Store& store, int version) {
    clobber();
    if (store.restart(version) != version) return ::testing::AssertionFailure() << "another version restored";
    const std::uint64_t from_l0 = store.last_restart().bytes_from_device_cache;
    if (from_l0 != kFirst + kSecond) return ::testing::AssertionFailure() << from_l0 << " bytes from L0";
    return hold(version);
  }
  // Whether the regions hold version `version` (1-based, as filled).
  ::testing::AssertionResult hold(int version) const {
    const auto index = static_cast<std::size_t>(version - 1);
    if (first.download() != first_versions[index]) return ::testing::AssertionFailure() << "first differs";
    if (second.download() != second_versions[index]) return ::testing::AssertionFailure() << "second differs";
    if (host != host_versions[index]) return ::testing::AssertionFailure() << "host differs";
    return ::testing::AssertionSuccess();
  }
};

TEST_F(FakeCudaTest, AStoreRoundTripsDeviceRegionsThroughL0AndRestartsDeviceToDevice) {
  {
    Store store("fake", store_config("64MiB"));
    StoreRegions regions;
    regions.protect(store);
    regions.take(store, 3);
    for (const VersionStats& stats : store.stats()) EXPECT_EQ(stats.device_path, "l0") << stats.version;

    EXPECT_TRUE(regions.restart_from_l0(store, 2));

    regions.clobber();
    EXPECT_EQ(store.restart(), 3);  // the newest, not known beforehand: from the levels
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, 0u);
    EXPECT_EQ(store.last_restart().level, kL2);
    EXPECT_TRUE(regions.hold(3));
    EXPECT_GT(control().calls("cuMemcpyDtoDAsync"), 0u);
  }
  EXPECT_EQ(counters().reservations, 0u) << "L0 was given back with the store";
}

TEST_F(FakeCudaTest, VersionsLargerThanL0AndStoresWithoutL0BypassItToHostMemory) {
  for (const char* capacity : {"2MiB", "0"}) {
    TempDir levels;
    Store store("fake", store_config(capacity, {{"local.path", levels.path()}}));
    StoreRegions regions;
    regions.protect(store);
    regions.take(store, 2);
    for (const VersionStats& stats : store.stats()) EXPECT_EQ(stats.device_path, "host") << capacity;
    regions.clobber();
    EXPECT_EQ(store.restart(1), 1) << capacity;
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, 0u) << capacity;
    EXPECT_TRUE(regions.hold(1)) << capacity;
  }
  EXPECT_EQ(control().calls("cuMemAddressReserve"), 1u) << "only the 2 MiB L0 was reserved";
}

TEST_F(FakeCudaTest, AFailingCopyIntoL0FailsTheCheckpointAndTheNextOneWorks) {
  Store store("fake", store_config("64MiB"));
  StoreRegions regions;
  regions.protect(store);
  regions.fill(1);
  store.checkpoint(1);

  regions.fill(2);
  // The second device region's copy fails, the first one's is in flight.
  ASSERT_EQ(control().fail("cuMemcpyDtoDAsync", 1, CUDA_ERROR_LAUNCH_FAILED, 1), 0);
  try {
    store.checkpoint(2);
    ADD_FAILURE() << "checkpoint 2 did not fail";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("cuMemcpyDtoDAsync (" + std::to_string(StoreRegions::kSecond) +
                                             " bytes into the device cache"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"),
              std::string::npos)
        << error.what();
  }
  store.wait();
  EXPECT_EQ(store.latest(), 1);
  for (const VersionInfo& info : store.versions()) EXPECT_NE(info.version, 2);

  store.checkpoint(2);
  store.wait();
  regions.clobber();
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_GT(store.last_restart().bytes_from_device_cache, 0u);
  EXPECT_TRUE(regions.hold(2));
  regions.clobber();
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(regions.hold(1));
}

// The staging buffer cannot be pinned: the versions still go through it.
TEST_F(FakeCudaTest, AStoreWhoseBufferCannotBePinnedKeepsCheckpointing) {
  ASSERT_EQ(control().fail("cuMemHostRegister", 0, CUDA_ERROR_OUT_OF_MEMORY, -1), 0);
  Store store("fake", store_config("0", {{"buffer.pin", "eager"}}));
  StoreRegions regions;
  regions.protect(store);
  regions.take(store, 2);
  EXPECT_GE(control().calls("cuMemHostRegister"), 1u);
  EXPECT_EQ(counters().registered_bytes, 0u);
  regions.clobber();
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(regions.hold(2));
}

TEST_F(FakeCudaTest, PointersOfTheOtherKindAreRefusedAndManagedMemoryWorks) {
  Store store("fake", store_config("8MiB"));
  DeviceBuffer device(4096);
  std::vector<unsigned char> host(4096);
  try {
    store.protect(0, device.get(), 4096, "device_as_host");
    ADD_FAILURE() << "a device pointer was protected as host memory";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("its pointer is device memory"), std::string::npos) << error.what();
  }
  EXPECT_THROW(store.protect_device(1, host.data(), host.size(), "host_as_device"), InvalidArgumentError);

  const std::size_t bytes = 256 * 1024 + 3;
  CUdeviceptr address = 0;
  check(driver().cuMemAllocManaged(&address, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  auto* managed = reinterpret_cast<unsigned char*>(address);
  EXPECT_THROW(store.protect_device(2, managed, bytes, "managed_as_device"), InvalidArgumentError);
  store.protect_managed(3, managed, bytes, "managed");
  const std::vector<unsigned char> saved = random_bytes<unsigned char>(bytes, 4);
  std::memcpy(managed, saved.data(), bytes);
  store.checkpoint(1);
  store.wait();
  std::memset(managed, 0, bytes);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(std::memcmp(managed, saved.data(), bytes), 0);
  store.close();
  check(driver().cuMemFree(address), "cuMemFree");
}

// The fake, like a driver that wants a context for pointer queries, refuses
// them on a thread where none is current: the check asks under the primary
// context, pushed and popped, and leaves the thread without one.
TEST_F(FakeCudaTest, ADevicePointerIsRefusedFromAThreadWithoutACurrentContext) {
  Store store("fake", store_config("8MiB"));
  DeviceBuffer device(4096);
  std::string refusal;
  CUresult query_without_context = CUDA_SUCCESS;
  CUcontext left_current = context_;
  std::thread application([&] {
    unsigned int managed = 0;
    query_without_context = driver().cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, device.address());
    try {
      store.protect(0, device.get(), 4096, "device_as_host");
    } catch (const InvalidArgumentError& error) {
      refusal = error.what();
    }
    CUcontext popped = nullptr;
    left_current = driver().cuCtxPopCurrent(&popped) == CUDA_ERROR_INVALID_CONTEXT ? nullptr : popped;
  });
  application.join();
  EXPECT_EQ(query_without_context, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_NE(refusal.find("its pointer is device memory"), std::string::npos) << refusal;
  EXPECT_EQ(left_current, nullptr) << "the check left a context current on the application's thread";
}

// ---------------------------------------------------------------- defects a GPU would show

// The loader asks every entry point for the legacy default stream's variant:
// the null stream of its calls is the legacy one, whatever the application
// was compiled with.
TEST_F(FakeCudaTest, EntryPointsAreResolvedForTheLegacyDefaultStream) {
  const CudaDriver loaded("libcuda.so.1");
  ASSERT_TRUE(loaded.available()) << loaded.why_unavailable();
  for (const char* name : {"cuMemcpyHtoD", "cuMemcpyDtoHAsync", "cuStreamSynchronize", "cuInit", "cuCtxGetDevice"}) {
    EXPECT_EQ(control().resolved_with(name, CU_GET_PROC_ADDRESS_LEGACY_STREAM), 1u) << name;
    EXPECT_EQ(control().resolved_with(name, CU_GET_PROC_ADDRESS_DEFAULT), 0u) << name;
  }
}

// A staging buffer of two pin pieces whose second registration is held:
// the first piece is registered, the second not, while versions are staged
// across the boundary; then both are, in two registrations. The driver
// refuses a copy over memory partly registered, and the fake one spanning
// two registrations: every copy must stay within a piece.
TEST_F(FakeCudaTest, StagingCopiesStayWithinAPinPieceWhileTheBufferIsPinnedAndAfter) {
  constexpr std::size_t kPiece = 4 * kMiB;
  const Config lazy = store_config("0", {{"buffer.pin", "lazy"}});
  control().hold_host_register(1);
  DeviceStaging staging(lazy, 2 * kPiece, std::make_unique<CudaHostPinner>(0, driver(), kPiece), log_);
  struct Release {  // before the staging buffer's destructor waits for its pinning thread
    ~Release() { control().release_host_register(); }
  } release_on_failure;
  ASSERT_EQ(control().wait_host_register_waiting(1), 1u) << "the second piece's registration never started";
  EXPECT_EQ(counters().registered_bytes, kPiece) << "the first piece alone is registered";

  DeviceBuffer device(2 * kPiece);
  const std::vector<unsigned char> bytes = random_bytes<unsigned char>(2 * kPiece, 11);
  device.upload(bytes);
  const auto from_device = [&](std::uint64_t offset, std::byte* target, std::uint64_t length) {
    check(driver().cuMemcpyDtoH(target, device.address() + offset, length), "cuMemcpyDtoH");
  };
  const auto staged = [&](const DeviceStaging::Block& block, std::size_t length) {
    return std::memcmp(block.data(), bytes.data(), length) == 0;
  };
  {
    const auto head = staging.stage(kPiece - kMiB, from_device);  // leaves the next block straddling the boundary
    const auto across = staging.stage(2 * kMiB + 123, from_device);
    EXPECT_TRUE(staged(*head, kPiece - kMiB));
    EXPECT_TRUE(staged(*across, 2 * kMiB + 123)) << "a copy over the registered and the unregistered piece";
  }
  control().release_host_register();
  ASSERT_TRUE(staging.stats().state != LatePinState::kPinFailed) << staging.stats().pin_failure;
  for (int polls = 0; polls < 1000 && !staging.stats().pinned; ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(staging.stats().pinned) << to_string(staging.stats().state) << " " << staging.stats().pin_failure;
  const auto head = staging.stage(kPiece - kMiB, from_device);
  const auto across = staging.stage(2 * kMiB + 123, from_device);
  EXPECT_TRUE(staged(*across, 2 * kMiB + 123)) << "a copy over two registrations";
}

// The application chose device 1 (cudaSetDevice): the store puts L0 there,
// copies there, and leaves the application's context current after every
// call, though it pushes its own for each driver call.
TEST_F(FakeCudaTest, AStoreUsesTheApplicationsDeviceAndLeavesItsContextCurrent) {
  ASSERT_EQ(control().set_device_count(2), -1) << "refused while the test holds device 0's context";
  // Device 0 is nearly full: L0 there could map 4 MiB of its 16.
  control().set_device_memory(64 * kMiB);
  const std::array<CUcontext, 2> contexts = two_devices();
  check(driver().cuCtxSetCurrent(contexts[0]), "cuCtxSetCurrent");
  CUdeviceptr filler = 0;
  check(driver().cuMemAlloc(&filler, 60 * kMiB), "cuMemAlloc");
  CUcontext device_1 = contexts[1];
  check(driver().cuCtxSetCurrent(device_1), "cuCtxSetCurrent");
  const auto current = [&] {
    CUcontext now = nullptr;
    check(driver().cuCtxGetCurrent(&now), "cuCtxGetCurrent");
    return now;
  };
  {
    Store store("fake", store_config("16MiB"));
    EXPECT_EQ(current(), device_1) << "open";
    StoreRegions regions;
    int ordinal = -1;
    check(driver().cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, regions.first.address()),
          "cuPointerGetAttribute");
    ASSERT_EQ(ordinal, 1);
    regions.protect(store);
    EXPECT_EQ(current(), device_1) << "protect";
    regions.take(store, 2);
    EXPECT_EQ(current(), device_1) << "checkpoint";
    for (const VersionStats& stats : store.stats()) EXPECT_EQ(stats.device_path, "l0") << stats.version;
    EXPECT_TRUE(regions.restart_from_l0(store, 2));
    regions.clobber();
    EXPECT_EQ(store.restart(1), 1);
    EXPECT_TRUE(regions.hold(1));
    EXPECT_EQ(current(), device_1) << "restart";
    EXPECT_GT(store.device_stats().cache->mapped, 4 * kMiB) << "L0 is on device 0, which has 4 MiB left";

    // The application works on device 0 meanwhile: the store still pushes
    // its device's context and pops it.
    check(driver().cuCtxSetCurrent(contexts[0]), "cuCtxSetCurrent");
    regions.fill(3);
    store.checkpoint(3);
    store.wait();
    regions.clobber();
    EXPECT_EQ(store.restart(3), 3);
    EXPECT_TRUE(regions.hold(3));
    EXPECT_EQ(current(), contexts[0]) << "checkpoint or restart left the store's context current";
    check(driver().cuCtxSetCurrent(device_1), "cuCtxSetCurrent");
  }
  EXPECT_EQ(current(), device_1) << "close";
  check(driver().cuCtxSetCurrent(contexts[0]), "cuCtxSetCurrent");
  check(driver().cuMemFree(filler), "cuMemFree");
}

// One store, one device: a region of another device is refused by name.
TEST_F(FakeCudaTest, ARegionOnAnotherDeviceThanTheStoresIsRefused) {
  const std::array<CUcontext, 2> contexts = two_devices();
  check(driver().cuCtxSetCurrent(contexts[1]), "cuCtxSetCurrent");
  {
    DeviceBuffer on_device_1(4096);
    check(driver().cuCtxSetCurrent(contexts[0]), "cuCtxSetCurrent");
    DeviceBuffer on_device_0(4096);
    Store store("fake", store_config("0"));
    store.protect_device(0, on_device_1.get(), 4096, "first");  // the store's device: the first region's
    try {
      store.protect_device(1, on_device_0.get(), 4096, "second");
      ADD_FAILURE() << "a region of device 0 was protected in a store on device 1";
    } catch (const InvalidArgumentError& error) {
      EXPECT_NE(std::string(error.what()).find("region 'second' of store 'fake': it is on device 0, and the "
                                               "store's device regions and L0 cache are on device 1"),
                std::string::npos)
          << error.what();
    }
    store.checkpoint(1);
    store.wait();
    EXPECT_EQ(store.describe(1).regions.size(), 1u) << "the refused region is not registered";
  }
}

// A pageable cuMemcpyHtoD returns once the bytes are staged, before they
// reach the device: restart must not return before they did. Held streams
// keep the copy queued; restart has to wait for it. (One device region:
// a second cuMemcpyHtoD would wait for the first one's stream itself.)
TEST_F(FakeCudaTest, RestartReturnsOnlyOnceTheBytesAreOnTheDevice) {
  Store store("fake", store_config("0"));
  DeviceBuffer region(kMiB);
  const std::vector<unsigned char> saved = random_bytes<unsigned char>(kMiB, 12);
  region.upload(saved);
  store.protect_device(0, region.get(), kMiB, "field");
  store.checkpoint(1);
  store.wait();
  region.upload(std::vector<unsigned char>(kMiB, 0));
  const std::uint64_t copies_before = control().calls("cuMemcpyHtoD");
  const std::uint64_t syncs_before = control().calls("cuStreamSynchronize");
  control().hold_streams(1);
  std::atomic<bool> returned{false};
  std::thread restart([&] {
    check(driver().cuCtxSetCurrent(context_), "cuCtxSetCurrent");
    store.restart(1);
    returned = true;
  });
  // Until restart waits for the stream holding its copy, or returns.
  for (int polls = 0; polls < 10000 && !returned; ++polls) {
    if (control().calls("cuMemcpyHtoD") > copies_before && control().calls("cuStreamSynchronize") > syncs_before) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(returned) << "restart returned while its host-to-device copy was still queued";
  control().hold_streams(0);
  restart.join();
  EXPECT_EQ(region.download(), saved);
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
