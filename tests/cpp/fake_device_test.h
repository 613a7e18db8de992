// A test against the fake CUDA driver (fake_cuda_lookup.h) with one device
// buffer of kBytes: skipped where the fake is not the loaded driver, and
// holding the fake's turn (start_fake_turn) from SetUp to TearDown, so that
// each test starts from a reset fake and says what it left behind. A
// derived SetUp calls this one first and returns when IsSkipped() or
// HasFatalFailure().
#pragma once

#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>

#include "cuda_calls.h"
#include "cuda_device_buffer.h"
#include "fake_cuda_lookup.h"

namespace resurgo::testing {

template <std::size_t kBytes>
class FakeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::fake().control) GTEST_SKIP() << gpu::fake().why_not;
    ASSERT_TRUE(gpu::cuda().available()) << gpu::cuda().why_unavailable();
    ASSERT_EQ(gpu::start_fake_turn(context_), "");
    device_ = std::make_unique<CudaDeviceBuffer>(kBytes);
  }
  void TearDown() override {
    if (!gpu::fake().control) return;
    device_.reset();
    EXPECT_EQ(gpu::finish_fake_turn(context_), "");
  }
  static const gpu::FakeControl& control() { return *gpu::fake().control; }

  CUcontext context_ = nullptr;
  std::unique_ptr<CudaDeviceBuffer> device_;
};

}  // namespace resurgo::testing

#endif  // RESURGO_HAVE_CUDA_HEADERS
