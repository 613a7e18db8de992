// Prefetch into the L0 device cache (issue 30, part 2; docs/adjoint.md,
// "Backward pass on the device") through the CUDA backend, against the fake
// CUDA driver: a restart of a prefetched version is one device-to-device
// copy per device region (the driver counts the calls), a driver error
// fails the prefetch of one version only, and a version discarded while
// its copy is in flight is dropped once it landed. Skips where
// libcuda.so.1 is not the fake, saying why. GpuDevicePrefetchTest runs on
// whatever driver is loaded (a GPU's, or the fake) and skips without one.
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/units.h"
#include "fake_device_test.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {


constexpr std::size_t kDeviceBytes = kMiB;

using gpu::cuda;

class FakeCudaDevicePrefetchTest : public testing::FakeDeviceTest<kDeviceBytes> {
 protected:
  Config config() {
    return Config::load("", {{"local.path", dir_.path() + "/l2"},
                             {"local.keep", "0"},
                             {"persistent.every", "0"},
                             {"device.capacity", "8MiB"},
                             {"device.chunk", "8MiB"},
                             {"log.level", "off"}});
  }
  void protect(Store& store) {
    store.protect(0, host_.data(), host_.size(), "host");
    store.protect_device(1, device_->get(), kDeviceBytes, "device");
  }
  static std::vector<unsigned char> device_bytes(int version) {
    return random_bytes<unsigned char>(kDeviceBytes, static_cast<unsigned>(version));
  }
  // Versions 1..count by a store closed since: the next one starts with
  // an empty L0.
  void write_versions(int count) {
    Store store("s", config());
    protect(store);
    for (int version = 1; version <= count; ++version) {
      std::fill(host_.begin(), host_.end(), static_cast<unsigned char>(version));
      device_->upload(device_bytes(version));
      store.checkpoint(version);
    }
    store.wait();
  }
  void expect_version(int version) {
    EXPECT_EQ(device_->download(), device_bytes(version)) << version;
    EXPECT_EQ(host_, std::vector<unsigned char>(host_.size(), static_cast<unsigned char>(version))) << version;
  }
  void scramble() {
    device_->upload(std::vector<unsigned char>(kDeviceBytes, 0xee));
    std::fill(host_.begin(), host_.end(), 0xee);
  }
  static DeviceCacheStats l0(Store& store) { return store.device_stats().cache.value_or(DeviceCacheStats{}); }

  TempDir dir_;
  std::vector<unsigned char> host_ = std::vector<unsigned char>(4096);
};

// Staged through pinned memory on the store's stream (host-to-device,
// asynchronous); restored with device-to-device copies, no host-to-device
// one.
TEST_F(FakeCudaDevicePrefetchTest, ARestartOfAPrefetchedVersionIsADeviceToDeviceCopy) {
  write_versions(3);
  Store store("s", config());
  protect(store);
  const std::uint64_t pins_before = control().calls("cuMemHostRegister");
  store.prefetch({3, 2, 1});
  ASSERT_TRUE(eventually([&] { return l0(store).prefetched == 3; }));
  EXPECT_GT(control().calls("cuMemHostRegister"), pins_before);  // the staging buffer
  for (int version : {3, 2, 1}) {
    scramble();
    const std::uint64_t d2d = control().calls("cuMemcpyDtoDAsync");
    const std::uint64_t h2d = control().calls("cuMemcpyHtoD") + control().calls("cuMemcpyHtoDAsync");
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(control().calls("cuMemcpyDtoDAsync"), d2d + 1) << version;
    EXPECT_EQ(control().calls("cuMemcpyHtoD") + control().calls("cuMemcpyHtoDAsync"), h2d) << version;
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes);
    expect_version(version);
    store.discard(version);
  }
  EXPECT_EQ(l0(store).restored_from_prefetch, 3u);
}

// The first copy into L0 fails: that version is read from the next level
// and the restart says why; the others come from L0.
TEST_F(FakeCudaDevicePrefetchTest, ADriverErrorFailsThePrefetchOfThatVersionOnly) {
  write_versions(3);
  Store store("s", config());
  protect(store);
  ASSERT_EQ(control().fail("cuMemcpyHtoDAsync", 0, CUDA_ERROR_LAUNCH_FAILED, 1), 0);
  store.prefetch({3, 2, 1});
  ASSERT_TRUE(eventually([&] { return l0(store).prefetched == 2; }));
  EXPECT_EQ(l0(store).prefetch_failed, 1u);
  scramble();
  EXPECT_EQ(store.restart(3), 3);
  expect_version(3);
  EXPECT_EQ(store.last_restart().bytes_from_device_cache, 0u);
  ASSERT_EQ(store.last_restart().skipped.size(), 1u);
  const std::string why = store.last_restart().skipped[0];
  EXPECT_NE(why.find("prefetch into the L0 device cache failed"), std::string::npos) << why;
  EXPECT_NE(why.find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << why;
  for (int version : {2, 1}) {
    scramble();
    EXPECT_EQ(store.restart(version), version);
    expect_version(version);
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes) << version;
    EXPECT_TRUE(store.last_restart().skipped.empty()) << version;
  }
}

// The streams are held while version 3 is copied into L0: its discard
// returns at once, and the copy is dropped once it landed.
TEST_F(FakeCudaDevicePrefetchTest, AVersionDiscardedWhileItIsPrefetchedIsDroppedFromL0) {
  write_versions(3);
  Store store("s", config());
  protect(store);
  const std::uint64_t h2d = control().calls("cuMemcpyHtoDAsync");
  control().hold_streams(1);
  store.prefetch({3, 2, 1});
  const bool in_flight = eventually([&] { return control().calls("cuMemcpyHtoDAsync") > h2d; });
  store.discard(3);
  control().hold_streams(0);
  ASSERT_TRUE(in_flight);
  ASSERT_TRUE(eventually([&] { return l0(store).prefetched == 3 && l0(store).versions == 2; }));
  EXPECT_EQ(l0(store).used, 2 * kDeviceBytes);
  EXPECT_THROW(store.restart(3), NotFoundError);
  scramble();
  EXPECT_EQ(store.restart(2), 2);
  expect_version(2);
  EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes);
}

// The backward pass on a GPU: every version of the order restored from L0,
// device to device, its bytes intact.
class GpuDevicePrefetchTest : public FakeCudaDevicePrefetchTest {
 protected:
  void SetUp() override {
    if (!cuda().available()) GTEST_SKIP() << "no usable CUDA driver: " << cuda().why_unavailable();
    cuda().check(cuda().cuDevicePrimaryCtxRetain(&context_, 0), "cuDevicePrimaryCtxRetain", "device 0");
    cuda().check(cuda().cuCtxSetCurrent(context_), "cuCtxSetCurrent", "device 0");
    device_ = std::make_unique<testing::CudaDeviceBuffer>(kDeviceBytes);
  }
  void TearDown() override {
    device_.reset();
    if (context_ != nullptr) cuda().cuDevicePrimaryCtxRelease(0);
  }
};

TEST_F(GpuDevicePrefetchTest, EveryVersionOfTheOrderIsRestoredFromL0) {
  write_versions(4);
  Store store("s", config());
  protect(store);
  store.prefetch({4, 3, 2, 1});
  for (int version : {4, 3, 2, 1}) {
    ASSERT_TRUE(eventually([&] { return l0(store).prefetched >= static_cast<std::uint64_t>(5 - version); }));
    scramble();
    EXPECT_EQ(store.restart(version), version);
    expect_version(version);
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes) << version;
    store.discard(version);
  }
  EXPECT_EQ(l0(store).restored_from_prefetch, 4u);
  EXPECT_EQ(l0(store).versions, 0u);
}

}  // namespace
}  // namespace resurgo
#endif  // RESURGO_HAVE_CUDA_HEADERS
