// Forked checkpoints of GPU state (issue 29 part 4, docs/gpu.md "Forked
// checkpoints of GPU state"): under capture.mode = "fork" the device and
// managed regions are drained into host memory by the driver's copies,
// then the writer is forked, and it never calls the driver. Against the
// fake CUDA driver (tests/cpp/fake_cuda), which refuses and counts any call
// from a forked child (fake_cuda_forked_child_calls) and lets a test play a
// kernel's write to managed memory (fake_cuda_kernel_write). Runs where
// libcuda.so.1 is the fake (the fake_cuda.* ctest tests); skips elsewhere.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../sanitized.h"
#include "capture/fork_capture.h"
#include "cuda_calls.h"
#include "cuda_device_buffer.h"
#include "fake_cuda_lookup.h"
#include "gpu/cuda_driver.h"
#include "hook_env.h"
#include "managed_buffer.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "writer_gate.h"

namespace resurgo::gpu {
namespace {

class ManagedForkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    kernel_write_ = fake_function<decltype(&fake_cuda_kernel_write)>("fake_cuda_kernel_write");
    forked_child_calls_ = fake_function<decltype(&fake_cuda_forked_child_calls)>("fake_cuda_forked_child_calls");
    ASSERT_NE(kernel_write_, nullptr) << "libcuda.so.1 is an older build of the fake";
    ASSERT_NE(forked_child_calls_, nullptr) << "libcuda.so.1 is an older build of the fake";
    ASSERT_EQ(start_fake_turn(context_), "");
  }
  void TearDown() override {
    ForkCapture::set_fork_function_for_testing(nullptr);
    if (!fake().control) return;
    EXPECT_EQ(forked_child_calls_(), expected_child_calls_) << "a forked writer called the driver";
    EXPECT_EQ(finish_fake_turn(context_), "");
  }

  Config fork_config(const std::string& l0_capacity = "0") {
    return cuda_store_config(dir_.path(), l0_capacity, {{"capture.mode", "fork"}});
  }
  // A kernel writes `bytes` over `managed`, and the application waits for it.
  void kernel_writes(const ManagedBuffer& managed, const std::vector<unsigned char>& bytes) {
    ASSERT_EQ(kernel_write_(nullptr, managed.get(), bytes.data(), bytes.size()), CUDA_SUCCESS);
    check(cuda().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  static std::vector<unsigned char> download(const testing::CudaDeviceBuffer& device, std::size_t bytes) {
    std::vector<unsigned char> host(bytes);
    check(cuda().cuMemcpyDtoH(host.data(), device.address(), bytes), "cuMemcpyDtoH");
    return host;
  }

  decltype(&fake_cuda_kernel_write) kernel_write_ = nullptr;
  decltype(&fake_cuda_forked_child_calls) forked_child_calls_ = nullptr;
  std::uint64_t expected_child_calls_ = 0;  // by the test itself
  CUcontext context_ = nullptr;
  TempDir dir_;
};

// What makes the suite's "no driver call in the child" mean something: the
// fake refuses and counts a call made from a forked child.
TEST_F(ManagedForkTest, TheFakeRefusesAndCountsADriverCallFromAForkedChild) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(cuda().cuCtxSynchronize() == CUDA_ERROR_NOT_PERMITTED ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's call was not refused";
  EXPECT_EQ(forked_child_calls_(), 1u);
  check(cuda().cuCtxSynchronize(), "cuCtxSynchronize");  // the parent's calls go on
  EXPECT_EQ(forked_child_calls_(), 1u);
  expected_child_calls_ = 1;
}

// checkpoint() returns once the regions were drained by the driver's copies
// and the writer forked; the child, held until the parent has overwritten
// every region (a kernel's write to managed memory, a copy to device
// memory, host stores), writes the state as it was at checkpoint() and
// calls the driver not once. With and without L0 (which fork mode bypasses).
TEST_F(ManagedForkTest, ChildWritesTheDrainedStateWhileTheParentComputesAndNeverCallsTheDriver) {
  for (const char* l0 : {"0", "16MiB"}) {
    TempDir levels;
    WriterGate gate;
    Store store("mfork", cuda_store_config(levels.path(), l0, {{"capture.mode", "fork"}}), gate.env());
    ManagedBuffer managed(3 * 100 * 1024 + 5);
    testing::CudaDeviceBuffer device(64 * 1024 + 3);
    std::vector<unsigned char> host = random_bytes<unsigned char>(1000, 1);
    const std::vector<unsigned char> managed_saved = random_bytes<unsigned char>(managed.bytes(), 2);
    const std::vector<unsigned char> device_saved = random_bytes<unsigned char>(64 * 1024 + 3, 3);
    const std::vector<unsigned char> host_saved = host;
    std::memset(managed.get(), 0, managed.bytes());
    kernel_writes(managed, managed_saved);
    device.upload(device_saved);
    store.protect_managed(0, managed.get(), managed.bytes(), "m");
    store.protect_device(1, device.get(), device_saved.size(), "d");
    store.protect(2, host.data(), host.size(), "h");
    const std::uint64_t drains = fake().control->calls("cuMemcpyDtoH");
    store.checkpoint(1);
    EXPECT_GE(fake().control->calls("cuMemcpyDtoH"), drains + 2) << l0 << ": not drained before checkpoint() returned";
    kernel_writes(managed, std::vector<unsigned char>(managed.bytes(), 0xEE));
    device.upload(std::vector<unsigned char>(device_saved.size(), 0xDD));
    std::fill(host.begin(), host.end(), 0xCC);
    gate.open();
    store.wait(1, kL2);
    EXPECT_EQ(store.stats().at(0).capture, "fork") << l0;
    EXPECT_EQ(forked_child_calls_(), 0u) << l0 << ": the forked writer called the driver";
    EXPECT_EQ(store.restart(1), 1) << l0;
    EXPECT_EQ(managed.bytes_now(), managed_saved) << l0;
    EXPECT_EQ(download(device, device_saved.size()), device_saved) << l0;
    EXPECT_EQ(host, host_saved) << l0;
    store.close();
  }
}

// The next checkpoint drains into the other half of the staging while the
// previous child still reads its own, then waits for that child
// (backpressure): each version holds its own bytes, and the half drained
// into, left out of the child, costs it no copy-on-write (which the child
// measures: what the parent duplicated while it lived). Three versions:
// the third drains into the half the first one used.
TEST_F(ManagedForkTest, TheNextDrainGoesToTheOtherHalfWhileAChildReadsItsOwn) {
  WriterGate gate;
  Store store("mfork", fork_config(), gate.env());
  ManagedBuffer managed(16 << 20);
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  std::vector<std::vector<unsigned char>> states;
  for (int value = 1; value <= 3; ++value) states.emplace_back(managed.bytes(), static_cast<unsigned char>(value));
  kernel_writes(managed, states[0]);
  store.checkpoint(1);
  gate.open();
  store.wait(1, kL2);
  kernel_writes(managed, states[1]);
  store.checkpoint(2);
  // A host store to managed memory: a kernel's write would have the fake
  // copy the bytes into heap memory the second child shares (copy-on-write
  // of the test's own making).
  std::memcpy(managed.get(), states[2].data(), managed.bytes());
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gate.open();  // the second child
    gate.open();  // the third
  });
  store.checkpoint(3);
  opener.join();
  store.wait();
  EXPECT_GT(store.stats().at(2).backpressure_seconds, 0.05) << "checkpoint 3 did not wait for the second child";
  // Under a sanitizer the child's own shadow memory counts as its
  // copy-on-write (as in the auto capture's tests): the figure says nothing.
  if (!kSanitized) {
    EXPECT_LT(store.stats().at(1).copy_on_write_bytes, managed.bytes() / 2)
        << "the drain of version 3 duplicated memory the second child shared";
  }
  for (int version = 2; version <= 3; ++version) {  // the level keeps two
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(managed.bytes_now(), states[static_cast<std::size_t>(version - 1)]) << "version " << version;
  }
}

// A child killed as it writes leaves the version uncommitted; the next works.
TEST_F(ManagedForkTest, ChildKilledWhileWritingLeavesThePreviousVersion) {
  auto env = std::make_shared<HookEnv>();
  const pid_t test_pid = ::getpid();
  bool kill_child = false;
  env->before_create = [&](const std::string&) {
    if (kill_child && ::getpid() != test_pid) ::raise(SIGKILL);
  };
  Store store("mfork", fork_config(), env);
  ManagedBuffer managed(64 * 1024);
  kernel_writes(managed, std::vector<unsigned char>(managed.bytes(), 5));
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  store.checkpoint(1);
  store.wait(1, kL2);
  kill_child = true;
  kernel_writes(managed, std::vector<unsigned char>(managed.bytes(), 6));
  store.checkpoint(2);
  try {
    store.wait(2, kL2);
    FAIL() << "a version whose writer was killed was reported durable";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("killed by signal"), std::string::npos) << error.what();
  }
  EXPECT_EQ(store.latest(), 1);
  kill_child = false;
  store.checkpoint(3);
  store.wait(3, kL2);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(managed.bytes_now(), std::vector<unsigned char>(managed.bytes(), 5));
  EXPECT_EQ(store.restart(3), 3);
  EXPECT_EQ(managed.bytes_now(), std::vector<unsigned char>(managed.bytes(), 6));
}

// fork() refused (a process limit): that version fails, saying to use copy
// mode; the store keeps working.
TEST_F(ManagedForkTest, RefusedForkFailsThatVersionSuggestingCopyMode) {
  Store store("mfork", fork_config());
  ManagedBuffer managed(64 * 1024);
  kernel_writes(managed, std::vector<unsigned char>(managed.bytes(), 7));
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  ForkCapture::set_fork_function_for_testing([]() -> pid_t {
    errno = EAGAIN;
    return -1;
  });
  store.checkpoint(1);
  try {
    store.wait(1, kL2);
    FAIL() << "a version whose fork failed was reported durable";
  } catch (const StorageError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("fork for checkpoint 1 failed"), std::string::npos) << what;
    EXPECT_NE(what.find("capture.mode = \"copy\""), std::string::npos) << what;
  }
  ForkCapture::set_fork_function_for_testing(nullptr);
  store.checkpoint(2);
  store.wait(2, kL2);
  std::memset(managed.get(), 0, managed.bytes());
  EXPECT_EQ(store.restart(), 2);
  EXPECT_EQ(managed.bytes_now(), std::vector<unsigned char>(managed.bytes(), 7));
}

// A drain that fails (the GPU faulted) fails that checkpoint alone, and
// forks nothing; the next one works.
TEST_F(ManagedForkTest, AFailingDrainFailsThatVersionOnly) {
  Store store("mfork", fork_config());
  ManagedBuffer managed(64 * 1024);
  kernel_writes(managed, std::vector<unsigned char>(managed.bytes(), 8));
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  ASSERT_EQ(fake().control->fail("cuMemcpyDtoH", 0, CUDA_ERROR_UNKNOWN, 1), 0);
  try {
    store.checkpoint(1);
    ADD_FAILURE() << "the checkpoint hid the failed copy";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cuMemcpyDtoH"), std::string::npos) << error.what();
  }
  store.checkpoint(2);
  store.wait();
  std::memset(managed.get(), 0, managed.bytes());
  EXPECT_EQ(store.restart(), 2);
  EXPECT_EQ(managed.bytes_now(), std::vector<unsigned char>(managed.bytes(), 8));
  EXPECT_EQ(forked_child_calls_(), 0u);
}

// Once checkpoint() returned, the version reads none of the application's
// managed memory: freeing it while the child is held still commits it.
TEST_F(ManagedForkTest, AManagedRegionFreedOnceCheckpointReturnedStillCommits) {
  WriterGate gate;
  Store store("mfork", fork_config(), gate.env());
  const std::size_t bytes = 200 * 1024;
  const std::vector<unsigned char> saved = random_bytes<unsigned char>(bytes, 9);
  {
    ManagedBuffer first(bytes);
    kernel_writes(first, saved);
    store.protect_managed(0, first.get(), bytes, "m");
    store.checkpoint(1);
    store.unprotect(0);
  }
  gate.open();
  store.wait(1, kL2);
  ManagedBuffer second(bytes);
  store.protect_managed(0, second.get(), bytes, "m");
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(second.bytes_now(), saved);
}

// Auto mode chooses per region from host write rates: it keeps refusing
// device and managed regions, naming fork mode.
TEST_F(ManagedForkTest, AutoModeRefusesAManagedRegionNamingForkMode) {
  Store store("mfork", cuda_store_config(dir_.path(), "0", {{"capture.mode", "auto"}}));
  ManagedBuffer managed(4096);
  try {
    store.protect_managed(0, managed.get(), managed.bytes(), "u");
    FAIL() << "auto mode took a managed region";
  } catch (const InvalidArgumentError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("managed region 'u' of store 'mfork': capture.mode = auto"), std::string::npos) << what;
    EXPECT_NE(what.find("use capture.mode = fork"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
