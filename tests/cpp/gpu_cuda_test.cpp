// The CUDA driver loader and the device cache over CUDA virtual memory
// management. Without a GPU (or driver) the device tests skip, saying why.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>

#include <filesystem>

#include "../sanitized.h"
#include "cuda_device_buffer.h"
#include "gpu/cuda_driver.h"
#include "gpu/cuda_vmm_memory.h"
#include "gpu/device_cache.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

TEST(GpuDriverTest, AMissingLibraryIsReportedWithTheLoaderText) {
  const CudaDriver driver("libresurgo-no-such-cuda.so.1");
  EXPECT_FALSE(driver.available());
  EXPECT_EQ(driver.why_unavailable().rfind("libresurgo-no-such-cuda.so.1 not found (", 0), 0u)
      << driver.why_unavailable();
  EXPECT_NE(driver.why_unavailable().find("cannot open shared object file"), std::string::npos)
      << driver.why_unavailable();
  try {
    driver.require();
    FAIL() << "require() did not throw";
  } catch (const GpuError& error) {
    EXPECT_NE(std::string(error.what()).find("libresurgo-no-such-cuda.so.1 not found"), std::string::npos);
    EXPECT_EQ(error.code(), ErrorCode::kStorage);
  }
}

// The toolkit's stub library has every symbol but no driver behind it.
TEST(GpuDriverTest, TheToolkitStubIsReportedAsNoDriver) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << stub << " is not installed";
  const CudaDriver driver(stub);
  EXPECT_FALSE(driver.available());
  EXPECT_EQ(driver.why_unavailable(),
            std::string(stub) + " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not an NVIDIA driver");
}

// The primary context of device 0 current on the test thread, as the
// application's runtime API would make it.
class GpuCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!driver().available()) GTEST_SKIP() << "no usable CUDA driver: " << driver().why_unavailable();
    driver().check(driver().cuDevicePrimaryCtxRetain(&context_, 0), "cuDevicePrimaryCtxRetain", "device 0");
    driver().check(driver().cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
  }
  void TearDown() override {
    if (context_ != nullptr) driver().cuDevicePrimaryCtxRelease(0);
  }
  static const CudaDriver& driver() { return CudaDriver::instance(); }
  CUcontext current() const {
    CUcontext now = nullptr;
    driver().check(driver().cuCtxGetCurrent(&now), "cuCtxGetCurrent", "test");
    return now;
  }
  CUcontext context_ = nullptr;
  Logger log_{"gpu-test", LogLevel::kOff};
};

TEST_F(GpuCudaTest, DriverErrorsAreNamedWithTheirCudaString) {
  try {
    driver().check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate", "1 GiB for a test");
    FAIL() << "check() did not throw";
  } catch (const GpuError& error) {
    EXPECT_STREQ(error.what(), "cuMemCreate (1 GiB for a test): CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    EXPECT_EQ(error.result(), CUDA_ERROR_OUT_OF_MEMORY);
  }
}

using DeviceBuffer = testing::CudaDeviceBuffer;

TEST_F(GpuCudaTest, VmmCacheMapsInChunksAndRoundTripsDeviceBytes) {
  auto memory = std::make_unique<CudaVmmMemory>(0);
  const std::size_t granularity = memory->granularity();
  DeviceCacheOptions options;
  options.chunk = 2 * granularity;
  options.capacity = 5 * granularity;  // 3 chunks, the last one smaller
  DeviceCache cache(std::move(memory), options, log_);
  cache.wait_growth_done();
  ASSERT_EQ(cache.stats().mapped, 5 * granularity) << cache.stats().growth_stopped;

  const std::size_t bytes = 3 * granularity + 12345;  // across chunk boundaries
  const std::vector<unsigned char> host = random_bytes<unsigned char>(bytes, 9);
  DeviceBuffer source(bytes);
  driver().check(driver().cuMemcpyHtoDAsync(source.address(), host.data(), bytes, nullptr), "cuMemcpyHtoDAsync",
                 "test");
  driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "test");
  ASSERT_EQ(cache.capture(1, {{source.get(), bytes}}).status, CaptureResult::Status::kCached);

  std::vector<unsigned char> to_host(bytes, 0);
  cache.read(1, 0, to_host.data(), bytes);
  EXPECT_EQ(to_host, host);

  DeviceBuffer target(bytes);
  driver().check(driver().cuMemsetD8Async(target.address(), 0, bytes, nullptr), "cuMemsetD8Async", "test");
  driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "test");
  cache.read(1, 0, target.get(), bytes);
  std::vector<unsigned char> via_device(bytes, 0);
  driver().check(driver().cuMemcpyDtoHAsync(via_device.data(), target.address(), bytes, nullptr), "cuMemcpyDtoHAsync",
                 "test");
  driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "test");
  EXPECT_EQ(via_device, host);
}

TEST_F(GpuCudaTest, VmmCacheEvictsFlushedVersionsWhenFull) {
  auto memory = std::make_unique<CudaVmmMemory>(0);
  const std::size_t granularity = memory->granularity();
  DeviceCacheOptions options;
  options.chunk = granularity;
  options.capacity = 2 * granularity;
  DeviceCache cache(std::move(memory), options, log_);
  DeviceBuffer source(granularity);
  driver().check(driver().cuMemsetD8Async(source.address(), 0x5a, granularity, nullptr), "cuMemsetD8Async", "test");
  driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "test");
  for (std::int64_t v = 1; v <= 4; ++v) {
    ASSERT_EQ(cache.capture(v, {{source.get(), granularity}}).status, CaptureResult::Status::kCached) << v;
    cache.flushed(v);
  }
  EXPECT_FALSE(cache.contains(2));
  std::vector<unsigned char> back(granularity);
  cache.read(4, 0, back.data(), back.size());
  EXPECT_EQ(back, std::vector<unsigned char>(granularity, 0x5a));
  EXPECT_EQ(cache.stats().evicted, 2u);
}

// Device regions of a Store on the GPU.
class GpuStoreTest : public GpuCudaTest {
 protected:
  Config config(const std::string& capacity) {
    return Config::load("", {{"local.path", dir_.path() + "/l2"},
                             {"persistent.every", "0"},
                             {"device.capacity", capacity},
                             {"device.chunk", "64MiB"},
                             {"log.level", "off"}});
  }
  // The application finishes writing its regions before checkpoint(): a
  // cuMemcpyHtoD from pageable memory may return before the bytes landed.
  void upload(const DeviceBuffer& buffer, const std::vector<unsigned char>& bytes) {
    driver().check(driver().cuMemcpyHtoD(buffer.address(), bytes.data(), bytes.size()), "cuMemcpyHtoD", "test");
    driver().check(driver().cuStreamSynchronize(nullptr), "cuStreamSynchronize", "test");
  }
  // Through a stream of its own that waits for nothing else, as a kernel on
  // the application's stream would read the region.
  std::vector<unsigned char> read_on_own_stream(const DeviceBuffer& buffer, std::size_t bytes) {
    CUstream stream = nullptr;
    driver().check(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", "test");
    std::vector<unsigned char> host(bytes);
    driver().check(driver().cuMemcpyDtoHAsync(host.data(), buffer.address(), bytes, stream), "cuMemcpyDtoHAsync",
                   "test");
    driver().check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize", "test");
    driver().check(driver().cuStreamDestroy(stream), "cuStreamDestroy", "test");
    return host;
  }
  std::vector<unsigned char> download(const DeviceBuffer& buffer, std::size_t bytes) {
    std::vector<unsigned char> host(bytes);
    driver().check(driver().cuMemcpyDtoH(host.data(), buffer.address(), bytes), "cuMemcpyDtoH", "test");
    return host;
  }
  TempDir dir_;
};

TEST_F(GpuStoreTest, DeviceRegionsRoundTripThroughL0AndWithoutIt) {
  for (const char* capacity : {"256MiB", "0"}) {
    TempDir levels;
    Config with = config(capacity);
    with.local.path = levels.path();
    Store store("gpu", with);
    // Smaller under the sanitizers, whose copies run ten times slower: what
    // they check does not depend on the size.
    const std::size_t bytes = (kSanitized ? (4u << 20) : (32u << 20)) + 4097;
    DeviceBuffer region(bytes);
    std::vector<unsigned char> host;
    for (int version = 1; version <= 3; ++version) {
      host = random_bytes<unsigned char>(bytes, static_cast<unsigned>(version));
      upload(region, host);
      if (version == 1) store.protect_device(0, region.get(), bytes, "field");
      store.checkpoint(version);
    }
    store.wait();
    upload(region, std::vector<unsigned char>(bytes, 0));
    EXPECT_EQ(store.restart(3), 3) << capacity;
    EXPECT_EQ(read_on_own_stream(region, bytes), host) << capacity << ": restart returned before the bytes landed";
    EXPECT_EQ(download(region, bytes), host) << capacity;
    EXPECT_EQ(current(), context_) << capacity << ": the store changed the thread's current context";
  }
  EXPECT_EQ(current(), context_) << "closing the store changed the thread's current context";
}

TEST_F(GpuStoreTest, APointerOfTheOtherKindIsRefused) {
  Store store("gpu", config("64MiB"));
  DeviceBuffer device(4096);
  std::vector<unsigned char> host(4096);
  EXPECT_THROW(store.protect(0, device.get(), 4096, "device_as_host"), InvalidArgumentError);
  EXPECT_THROW(store.protect_device(1, host.data(), host.size(), "host_as_device"), InvalidArgumentError);
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
