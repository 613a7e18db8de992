// Restart puts a managed region back on the store's device (issue 29 part 2,
// docs/gpu.md "Managed memory"): after the copy back, cuMemPrefetchAsync to
// that device, so that the application's kernels do not fault the pages
// over one at a time. Against the fake CUDA driver, which remembers where
// each managed allocation was last prefetched (fake_cuda_prefetch_location);
// skips where libcuda.so.1 is not the fake.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda_calls.h"
#include "fake_cuda_lookup.h"
#include "gpu/cuda_driver.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

class ManagedPrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    location_ = fake_function<decltype(&fake_cuda_prefetch_location)>("fake_cuda_prefetch_location");
    ASSERT_NE(location_, nullptr) << "libcuda.so.1 is an older build of the fake";
    ASSERT_EQ(start_fake_turn(context_), "");
    allocate();
  }
  // A new allocation: never prefetched.
  void allocate() {
    if (managed_ != 0) cuda().cuMemFree(managed_);
    cuda().check(cuda().cuMemAllocManaged(&managed_, kBytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged", "test");
  }
  void TearDown() override {
    if (!fake().control) return;
    if (managed_ != 0) cuda().cuMemFree(managed_);
    EXPECT_EQ(finish_fake_turn(context_), "");
  }
  unsigned char* managed() const { return reinterpret_cast<unsigned char*>(managed_); }

  static constexpr std::size_t kBytes = 128 * 1024 + 7;
  decltype(&fake_cuda_prefetch_location) location_ = nullptr;
  CUcontext context_ = nullptr;
  CUdeviceptr managed_ = 0;
  TempDir dir_;
};

// From a level (host copy, then cuMemcpyHtoD) and from L0 (device to
// device), in copy and fork mode: the region ends on device 0, the store's.
TEST_F(ManagedPrefetchTest, RestartPrefetchesAManagedRegionToTheStoresDevice) {
  for (const char* mode : {"copy", "fork"}) {
    for (const char* l0 : {"0", "16MiB"}) {
      const std::string what = std::string(mode) + ", L0 " + l0;
      TempDir levels;
      allocate();
      Store store("prefetch", cuda_store_config(levels.path(), l0, {{"capture.mode", mode}}));
      std::memset(managed(), 3, kBytes);
      store.protect_managed(0, managed(), kBytes, "m");
      store.checkpoint(1);
      store.wait();
      EXPECT_EQ(location_(managed()), CU_DEVICE_INVALID) << what << ": a checkpoint moved the region";
      std::memset(managed(), 0, kBytes);
      const std::uint64_t prefetches = fake().control->calls("cuMemPrefetchAsync");
      EXPECT_EQ(store.restart(1), 1) << what;
      EXPECT_EQ(fake().control->calls("cuMemPrefetchAsync"), prefetches + 1) << what;
      EXPECT_EQ(location_(managed()), 0) << what << ": not prefetched to the store's device";
      EXPECT_EQ(std::vector<unsigned char>(managed(), managed() + kBytes), std::vector<unsigned char>(kBytes, 3))
          << what;
      store.close();
    }
  }
}

// A refused prefetch costs page faults later, not bytes: the restart
// succeeds with the region whole.
TEST_F(ManagedPrefetchTest, ARefusedPrefetchLeavesTheRestartWhole) {
  Store store("prefetch", cuda_store_config(dir_.path(), "0"));
  std::memset(managed(), 4, kBytes);
  store.protect_managed(0, managed(), kBytes, "m");
  store.checkpoint(1);
  store.wait();
  std::memset(managed(), 0, kBytes);
  ASSERT_EQ(fake().control->fail("cuMemPrefetchAsync", 0, CUDA_ERROR_INVALID_DEVICE, 1), 0);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(location_(managed()), CU_DEVICE_INVALID);
  EXPECT_EQ(std::vector<unsigned char>(managed(), managed() + kBytes), std::vector<unsigned char>(kBytes, 4));
}

// A driver without the cuMemPrefetchAsync variant this build calls (before
// CUDA 12.2 for CUDA 13's <cuda.h>) stays usable, without the prefetch:
// the fake refuses the lookup that follows the required entry points.
TEST_F(ManagedPrefetchTest, ADriverThatLacksThePrefetchIsUsableWithoutIt) {
#define RESURGO_COUNT_ENTRY(name, version) +1
  constexpr int kRequired = 0 RESURGO_CUDA_ENTRY_POINTS(RESURGO_COUNT_ENTRY);
#undef RESURGO_COUNT_ENTRY
  ASSERT_EQ(fake().control->fail("cuGetProcAddress", kRequired, CUDA_ERROR_NOT_FOUND, 1), 0);
  const CudaDriver lacking("libcuda.so.1");
  EXPECT_TRUE(lacking.available()) << lacking.why_unavailable();
  EXPECT_EQ(lacking.cuMemPrefetchAsync, nullptr);
  const CudaDriver complete("libcuda.so.1");
  EXPECT_TRUE(complete.available()) << complete.why_unavailable();
  EXPECT_NE(complete.cuMemPrefetchAsync, nullptr);
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
