// CUDA managed memory (issue 29, docs/gpu.md "Managed memory") against the
// fake CUDA driver (tests/cpp/fake_cuda), which knows managed allocations
// and lets a test play a GPU kernel that writes to them
// (fake_cuda_kernel_write): the write is invisible to the host until a
// synchronisation, as on a GPU. ManagedMemoryTest runs where libcuda.so.1 is
// the fake (LD_LIBRARY_PATH, as for the fake_cuda.* suites) and skips
// elsewhere; ManagedWithoutDriverTest runs where there is no driver at all.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda_calls.h"
#include "cuda_device_buffer.h"
#include "fake_cuda_lookup.h"
#include "managed_buffer.h"
#include "gpu/cuda_device_access.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

using KernelWrite = decltype(&fake_cuda_kernel_write);

class ManagedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    write_ = fake_function<KernelWrite>("fake_cuda_kernel_write");
    ASSERT_NE(write_, nullptr) << "libcuda.so.1 is a build of the fake without fake_cuda_kernel_write";
    const std::string started = start_fake_turn(context_);
    ASSERT_EQ(started, "");
    check(cuda().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  void TearDown() override {
    if (!fake().control) return;
    if (stream_ != nullptr) check(cuda().cuStreamDestroy(stream_), "cuStreamDestroy");
    EXPECT_EQ(finish_fake_turn(context_), "");
  }

  Config store_config(const std::string& capacity, const std::map<std::string, std::string>& more = {}) {
    return cuda_store_config(dir_.path(), capacity, more);
  }

  // A kernel on the application's stream writes `bytes` over `buffer`.
  void launch_write(const ManagedBuffer& buffer, const std::vector<unsigned char>& bytes) {
    ASSERT_EQ(write_(stream_, buffer.get(), bytes.data(), bytes.size()), CUDA_SUCCESS);
  }

  static std::string refusal(const std::function<void()>& call) {
    try {
      call();
    } catch (const InvalidArgumentError& error) {
      return error.what();
    }
    return "(not refused)";
  }

  KernelWrite write_ = nullptr;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  TempDir dir_;
};

// ------------------------------------------------------------- part 1: the pointer is checked

TEST_F(ManagedMemoryTest, ProtectManagedRefusesAHostPointerNamingTheRegionAndTheCallToUse) {
  Store store("managed", store_config("0"));
  std::vector<unsigned char> host(4096);
  const std::string why = refusal([&] { store.protect_managed(0, host.data(), host.size(), "grid"); });
  EXPECT_NE(why.find("region 'grid' of store 'managed' as managed memory: its pointer is host memory; use protect "
                     "(rsg_protect)"),
            std::string::npos)
      << why;
}

TEST_F(ManagedMemoryTest, ProtectManagedRefusesADevicePointer) {
  Store store("managed", store_config("0"));
  testing::CudaDeviceBuffer device(4096);
  const std::string why = refusal([&] { store.protect_managed(0, device.get(), 4096, "field"); });
  EXPECT_NE(why.find("region 'field' of store 'managed' as managed memory: its pointer is device memory; use "
                     "protect_device"),
            std::string::npos)
      << why;
}

TEST_F(ManagedMemoryTest, ProtectDeviceRefusesAManagedPointer) {
  Store store("managed", store_config("0"));
  ManagedBuffer managed(4096);
  const std::string why = refusal([&] { store.protect_device(0, managed.get(), managed.bytes(), "u"); });
  EXPECT_NE(why.find("region 'u' of store 'managed' as device memory: its pointer is managed memory; use "
                     "protect_managed"),
            std::string::npos)
      << why;
}

TEST_F(ManagedMemoryTest, ProtectOfAManagedPointerPicksTheManagedKind) {
  Store store("managed", store_config("0"));
  ManagedBuffer managed(8192);
  std::vector<unsigned char> host(100, 3);
  store.protect(0, managed.get(), managed.bytes(), "m");
  store.protect(1, host.data(), host.size(), "h");
  store.checkpoint(1);
  store.wait();
  const VersionDescription description = store.describe(1);
  ASSERT_EQ(description.regions.size(), 2u);
  EXPECT_EQ(description.regions[0].kind, MemoryKind::kManaged);
  EXPECT_EQ(description.regions[1].kind, MemoryKind::kHost);
}

// The C API passes the refusal on: RSG_EINVAL, the region named.
TEST_F(ManagedMemoryTest, RsgProtectManagedRefusesAHostPointer) {
  setenv("RESURGO_LOCAL_PATH", (dir_.path() + "/l2").c_str(), 1);
  setenv("RESURGO_DEVICE_BACKEND", "cuda", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "cmanaged", &store), RSG_OK) << rsg_last_error();
  std::vector<unsigned char> host(64);
  EXPECT_EQ(rsg_protect_managed(store, 0, host.data(), host.size(), "cgrid"), RSG_EINVAL);
  EXPECT_NE(std::string(rsg_last_error()).find("'cgrid'"), std::string::npos) << rsg_last_error();
  EXPECT_NE(std::string(rsg_last_error()).find("its pointer is host memory"), std::string::npos) << rsg_last_error();
  EXPECT_EQ(rsg_close(store), RSG_OK) << rsg_last_error();
  unsetenv("RESURGO_LOCAL_PATH");
  unsetenv("RESURGO_DEVICE_BACKEND");
}

// ------------------------------------------------------------- part 5: the fake's managed semantics

// What a checkpoint without the synchronisation would have read: a kernel's
// write is neither in host loads nor in the driver's copies until the
// context (or the kernel's stream) is synchronised.
TEST_F(ManagedMemoryTest, AKernelsWriteIsStaleForHostLoadsAndCopiesUntilASynchronize) {
  ManagedBuffer managed(64 * 1024);
  const std::vector<unsigned char> before = random_bytes<unsigned char>(managed.bytes(), 1);
  const std::vector<unsigned char> after = random_bytes<unsigned char>(managed.bytes(), 2);
  std::memcpy(managed.get(), before.data(), before.size());
  launch_write(managed, after);

  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // many copy delays: nothing runs it
  EXPECT_TRUE(managed.holds(before)) << "a host load saw the kernel's write before any synchronisation";
  CudaDeviceAccess access(0);
  std::vector<unsigned char> copied(managed.bytes());
  access.to_host(copied.data(), managed.get(), copied.size());
  EXPECT_EQ(copied, before) << "a copy (on the null stream) saw the write of a kernel on another stream";

  check(cuda().cuCtxSynchronize(), "cuCtxSynchronize");
  EXPECT_TRUE(managed.holds(after));
}

TEST_F(ManagedMemoryTest, AKernelsWriteRunsInStreamOrder) {
  ManagedBuffer managed(4096);
  std::memset(managed.get(), 0, managed.bytes());
  launch_write(managed, std::vector<unsigned char>(managed.bytes(), 7));
  std::vector<unsigned char> copied(managed.bytes());
  check(cuda().cuMemcpyDtoHAsync(copied.data(), reinterpret_cast<CUdeviceptr>(managed.get()), copied.size(), stream_),
        "cuMemcpyDtoHAsync");
  check(cuda().cuStreamSynchronize(stream_), "cuStreamSynchronize");
  EXPECT_EQ(copied, std::vector<unsigned char>(managed.bytes(), 7)) << "a copy after the kernel on its stream";
  unsigned char host = 1;
  EXPECT_EQ(write_(stream_, &host, &host, 1), CUDA_ERROR_INVALID_VALUE) << "a kernel write to host memory";
}

// The driver marks managed memory do-not-fork: a forked child (fork capture)
// cannot read it. The child reads one byte and exits 0 only if it could.
TEST_F(ManagedMemoryTest, AForkedChildCannotReadManagedMemory) {
  ManagedBuffer managed(4096);
  managed.get()[0] = 1;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const volatile unsigned char* byte = managed.get();
    ::_exit(*byte == 1 ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child read managed memory";
}

// ------------------------------------------------------------- part 2: the store synchronises, then copies by DMA

// Through L0 (device to device) and without it (device to host): either way
// the version holds the kernel's bytes, because the store synchronised the
// context first; the bytes moved by the driver's copies, and restart copies
// them back the same way.
TEST_F(ManagedMemoryTest, ACheckpointHoldsWhatAKernelWroteBeforeIt) {
  for (const char* capacity : {"0", "16MiB"}) {
    TempDir levels;
    Store store("managed", store_config(capacity, {{"local.path", levels.path()}}));
    ManagedBuffer managed(3 * 100 * 1024 + 5);
    std::vector<unsigned char> host = random_bytes<unsigned char>(1000, 3);
    const std::vector<unsigned char> host_saved = host;
    store.protect_managed(0, managed.get(), managed.bytes(), "m");
    store.protect(1, host.data(), host.size(), "h");
    std::memset(managed.get(), 0, managed.bytes());
    const std::vector<unsigned char> written = random_bytes<unsigned char>(managed.bytes(), 4);
    launch_write(managed, written);
    const std::uint64_t synchronized = fake().control->calls("cuCtxSynchronize");
    store.checkpoint(1);
    EXPECT_GT(fake().control->calls("cuCtxSynchronize"), synchronized) << capacity;
    store.wait();
    const std::uint64_t copies = fake().control->calls(*capacity == '0' ? "cuMemcpyDtoH" : "cuMemcpyDtoDAsync");
    EXPECT_GT(copies, 0u) << capacity << ": managed memory was not copied by the driver";

    std::memset(managed.get(), 0, managed.bytes());
    std::memset(host.data(), 0, host.size());
    const std::uint64_t restored_before = fake().control->calls("cuMemcpyHtoD") +
                                          fake().control->calls("cuMemcpyDtoDAsync");
    EXPECT_EQ(store.restart(1), 1);
    EXPECT_GT(fake().control->calls("cuMemcpyHtoD") + fake().control->calls("cuMemcpyDtoDAsync"), restored_before)
        << capacity << ": restart did not copy the managed region back by the driver";
    EXPECT_TRUE(managed.holds(written)) << capacity << ": the version missed the kernel's write";
    EXPECT_EQ(host, host_saved) << capacity;
    store.close();
  }
}

// A synchronisation that fails (a kernel faulted) fails that checkpoint,
// saying so; the next one works.
TEST_F(ManagedMemoryTest, AFailedSynchronizeFailsThatCheckpointOnly) {
  Store store("managed", store_config("0"));
  ManagedBuffer managed(4096);
  std::memset(managed.get(), 1, managed.bytes());
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  ASSERT_EQ(fake().control->fail("cuCtxSynchronize", 0, CUDA_ERROR_LAUNCH_FAILED, 1), 0);
  try {
    store.checkpoint(1);
    ADD_FAILURE() << "the checkpoint hid the failed synchronisation";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cuCtxSynchronize"), std::string::npos) << error.what();
  }
  store.checkpoint(2);
  store.wait();
  std::memset(managed.get(), 0, managed.bytes());
  EXPECT_EQ(store.restart(), 2);
  EXPECT_TRUE(managed.holds(std::vector<unsigned char>(managed.bytes(), 1)));
}

// With capture streams named (part 2: Store::set_capture_streams), a
// checkpoint synchronises those streams, not the context: a kernel's write
// on a named stream is in the version, one on another stream is not yet
// (the application promised none there), and no cuCtxSynchronize runs.
// Naming none goes back to the whole context.
TEST_F(ManagedMemoryTest, NamedCaptureStreamsAreSynchronisedInsteadOfTheContext) {
  Store store("managed", store_config("0"));
  ManagedBuffer named(4096), other(4096);
  std::memset(named.get(), 0, named.bytes());
  std::memset(other.get(), 0, other.bytes());
  store.protect_managed(0, named.get(), named.bytes(), "named");
  store.protect_managed(1, other.get(), other.bytes(), "other");
  CUstream other_stream = nullptr;
  check(cuda().cuStreamCreate(&other_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const std::vector<unsigned char> ones(4096, 1), twos(4096, 2), zeros(4096, 0);
  store.set_capture_streams({stream_});
  launch_write(named, ones);
  ASSERT_EQ(write_(other_stream, other.get(), twos.data(), twos.size()), CUDA_SUCCESS);
  const std::uint64_t contexts = fake().control->calls("cuCtxSynchronize");
  const std::uint64_t streams = fake().control->calls("cuStreamSynchronize");
  store.checkpoint(1);
  EXPECT_EQ(fake().control->calls("cuCtxSynchronize"), contexts);
  EXPECT_GT(fake().control->calls("cuStreamSynchronize"), streams);
  store.set_capture_streams({});
  store.checkpoint(2);  // the whole context: the other stream's write too
  EXPECT_GT(fake().control->calls("cuCtxSynchronize"), contexts);
  store.wait();
  check(cuda().cuStreamDestroy(other_stream), "cuStreamDestroy");
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(named.holds(ones));
  EXPECT_TRUE(other.holds(zeros)) << "a stream not named was synchronised";
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(other.holds(twos));
}

// A named stream whose synchronisation fails fails that checkpoint, naming
// the call and the stream; the C API passes the streams on.
TEST_F(ManagedMemoryTest, AFailedStreamSynchronizeFailsThatCheckpointOnly) {
  setenv("RESURGO_LOCAL_PATH", (dir_.path() + "/l2").c_str(), 1);
  setenv("RESURGO_DEVICE_BACKEND", "cuda", 1);
  rsg_store* handle = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "managed-c", &handle), RSG_OK) << rsg_last_error();
  unsetenv("RESURGO_LOCAL_PATH");
  unsetenv("RESURGO_DEVICE_BACKEND");
  ManagedBuffer managed(4096);
  ASSERT_EQ(rsg_protect_managed(handle, 0, managed.get(), managed.bytes(), "m"), RSG_OK) << rsg_last_error();
  void* streams[] = {stream_};
  EXPECT_EQ(rsg_set_capture_streams(handle, nullptr, 1), RSG_EINVAL);
  ASSERT_EQ(rsg_set_capture_streams(handle, streams, 1), RSG_OK) << rsg_last_error();
  ASSERT_EQ(fake().control->fail("cuStreamSynchronize", 0, CUDA_ERROR_LAUNCH_FAILED, 1), 0);
  EXPECT_NE(rsg_checkpoint(handle, 1), RSG_OK);
  const std::string why = rsg_last_error();
  EXPECT_NE(why.find("cuStreamSynchronize"), std::string::npos) << why;
  EXPECT_NE(why.find("capture stream 0 of 1"), std::string::npos) << why;
  EXPECT_EQ(rsg_checkpoint(handle, 2), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_close(handle), RSG_OK) << rsg_last_error();
}

// Once checkpoint() returned the version holds its own copy (L0 or host
// memory): the application may free the region at once. The fake fails a
// copy that still reads freed memory (CUDA_ERROR_ILLEGAL_ADDRESS).
TEST_F(ManagedMemoryTest, ARegionFreedOnceCheckpointReturnedLeavesTheVersionWhole) {
  for (const char* capacity : {"0", "16MiB"}) {
    TempDir levels;
    Store store("managed", store_config(capacity, {{"local.path", levels.path()}}));
    const std::size_t bytes = 200 * 1024;
    const std::vector<unsigned char> saved = random_bytes<unsigned char>(bytes, 5);
    {
      ManagedBuffer first(bytes);
      std::memcpy(first.get(), saved.data(), bytes);
      store.protect_managed(0, first.get(), bytes, "m");
      store.checkpoint(1);
      store.unprotect(0);
    }
    store.wait();
    ManagedBuffer second(bytes);
    store.protect_managed(0, second.get(), bytes, "m");
    EXPECT_EQ(store.restart(1), 1) << capacity;
    EXPECT_TRUE(second.holds(saved)) << capacity;
    store.close();
  }
}

// A copy that fails (the GPU faulted) fails that version only.
TEST_F(ManagedMemoryTest, AFailingCopyFailsThatVersionOnly) {
  Store store("managed", store_config("0"));
  ManagedBuffer managed(4096);
  std::memset(managed.get(), 2, managed.bytes());
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
  EXPECT_TRUE(managed.holds(std::vector<unsigned char>(managed.bytes(), 2)));
}

// ------------------------------------------------------------- part 3: delta mode

// Each version of a managed region is whole: a kernel's writes never show
// in the host's write tracking. One log line says so at protect.
TEST_F(ManagedMemoryTest, DeltaModeTakesAManagedRegionInFullAtEveryVersion) {
  ::testing::internal::CaptureStderr();
  Store store("managed", store_config("0", {{"capture.mode", "delta"}, {"log.level", "info"}}));
  ManagedBuffer managed(64 * 1024);
  std::vector<unsigned char> host(8192, 0);
  std::memset(managed.get(), 0, managed.bytes());
  store.protect_managed(0, managed.get(), managed.bytes(), "m");
  store.protect(1, host.data(), host.size(), "h");
  std::vector<std::vector<unsigned char>> written;
  for (int version = 1; version <= 3; ++version) {
    written.push_back(random_bytes<unsigned char>(managed.bytes(), 10 + version));
    launch_write(managed, written.back());
    host[static_cast<std::size_t>(version)] = static_cast<unsigned char>(version);
    store.checkpoint(version);
    store.wait();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string line = "managed region 'm' of store 'managed' is captured in full at every version";
  EXPECT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find(line), log.rfind(line)) << "logged more than once:\n" << log;
  for (const VersionStats& stats : store.stats()) {
    EXPECT_EQ(stats.device_bytes, managed.bytes()) << "version " << stats.version << " took part of 'm'";
  }
  for (int version = 1; version <= 3; ++version) {
    std::memset(managed.get(), 0, managed.bytes());
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(managed.holds(written[static_cast<std::size_t>(version - 1)])) << "version " << version;
  }
}

}  // namespace

// ------------------------------------------------------------- no driver

// Where no libcuda.so.1 can be loaded (the plain test run on a machine
// without a GPU): a managed region needs the driver, and says so.
TEST(ManagedWithoutDriverTest, ProtectManagedFailsClearlyWithoutADriver) {
  if (CudaDriver::instance().available()) GTEST_SKIP() << "a CUDA driver (or the fake) is loaded here";
  TempDir dir;
  Store store("nodriver", Config::load("", {{"local.path", dir.path() + "/l2"},
                                            {"device.backend", "cuda"},
                                            {"log.level", "off"}}));
  std::vector<unsigned char> host(64);
  try {
    store.protect_managed(0, host.data(), host.size(), "grid");
    ADD_FAILURE() << "a managed region was protected without a driver";
  } catch (const Error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("cannot protect managed region 'grid' of store 'nodriver'"), std::string::npos) << what;
    EXPECT_NE(what.find("the CUDA driver is unavailable"), std::string::npos) << what;
  }
  store.protect(1, host.data(), host.size(), "plain");  // host memory needs no driver
}

// The host backend stands host memory in for managed memory (tests, the
// host analog): nothing to check, the round trip works.
TEST(ManagedWithoutDriverTest, TheHostBackendTakesHostMemoryForManagedMemory) {
  TempDir dir;
  Store store("hostmanaged", Config::load("", {{"local.path", dir.path() + "/l2"},
                                               {"device.backend", "host"},
                                               {"log.level", "off"}}));
  std::vector<unsigned char> managed = random_bytes<unsigned char>(5000, 9);
  const std::vector<unsigned char> saved = managed;
  store.protect_managed(0, managed.data(), managed.size(), "m");
  store.checkpoint(1);
  store.wait();
  std::fill(managed.begin(), managed.end(), 0);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(managed, saved);
  EXPECT_EQ(store.describe(1).regions[0].kind, MemoryKind::kManaged);
}

}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
