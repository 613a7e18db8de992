// device.ordinal: the device a store uses (docs/gpu.md, "Which device").
// The key's parsing runs everywhere; the rest runs against the fake CUDA
// driver with two devices, each with its own books (fake_cuda_device_books),
// and skips where libcuda.so.1 is not the fake, saying why.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/units.h"
#include "core/config_checks.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"

#ifdef RESURGO_HAVE_CUDA_HEADERS

#include "fake_cuda_lookup.h"
#include "cuda_device_buffer.h"
#include "gpu/device_access.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#endif

namespace resurgo {
namespace {

Config with_ordinal(const std::string& text) { return Config::load("", {{"device.ordinal", text}}); }

TEST(DeviceOrdinalConfigTest, TakesAutoOrAnOrdinal) {
  EXPECT_EQ(Config{}.device.ordinal, kAutoDevice);
  EXPECT_EQ(with_ordinal("auto").device.ordinal, kAutoDevice);
  EXPECT_EQ(with_ordinal("AUTO").device.ordinal, kAutoDevice);
  EXPECT_EQ(with_ordinal("0").device.ordinal, 0);
  EXPECT_EQ(with_ordinal("3").device.ordinal, 3);
  Config l0 = with_ordinal("1");
  l0.device.capacity = 1 << 20;
  EXPECT_NE(config_summary(l0).find("device 1)"), std::string::npos) << config_summary(l0);
}

TEST(DeviceOrdinalConfigTest, RefusesWhatIsNeitherAutoNorAnOrdinal) {
  for (const char* text : {"-1", "one", "1.5", "", "1 2", "70000"}) {
    try {
      with_ordinal(text);
      ADD_FAILURE() << "'" << text << "' was taken";
    } catch (const ConfigError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("device.ordinal"), std::string::npos) << message;
      EXPECT_NE(message.find("\"auto\" or a device ordinal"), std::string::npos) << message;
    }
  }
}

#ifdef RESURGO_HAVE_CUDA_HEADERS

using gpu::CudaDriver;
using gpu::fake;
using gpu::FakeControl;

constexpr std::size_t kRegionBytes = 2 * kMiB + 4097;

const CudaDriver& cuda() { return CudaDriver::instance(); }
void check(CUresult result, const char* call) { cuda().check(result, call, "test"); }

// One variable of the environment set for a scope, then put back.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Two devices, no context retained or current when a test starts; each
// test gives back what it retained and leaves nothing behind.
class FakeCudaDeviceOrdinalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    ASSERT_TRUE(cuda().available()) << cuda().why_unavailable();
    FakeCudaCounters before = {};
    ASSERT_EQ(control().reset(&before), 0u) << "left by an earlier test: " << gpu::describe(before);
    ASSERT_EQ(control().set_device_count(2), 0);
    books_ = gpu::fake_function<decltype(books_)>("fake_cuda_device_books");
    ASSERT_NE(books_, nullptr) << "libcuda.so.1 is an older build of the fake, without fake_cuda_device_books";
  }

  void TearDown() override {
    if (!fake().control) return;
    for (int ordinal = 0; ordinal < 2; ++ordinal) {
      if (retained_[ordinal] != nullptr) cuda().cuDevicePrimaryCtxRelease(ordinal);
    }
    cuda().cuCtxSetCurrent(nullptr);
    FakeCudaCounters left = {};
    EXPECT_EQ(control().reset(&left), 0u) << "leaked: " << gpu::describe(left);
  }

  static const FakeControl& control() { return *fake().control; }

  FakeCudaDeviceBooks books(int device) const {
    FakeCudaDeviceBooks now = {};
    EXPECT_EQ(books_(device, &now), 0);
    return now;
  }

  // Device `ordinal`'s primary context, retained until TearDown.
  CUcontext context_of(int ordinal) {
    if (retained_[ordinal] == nullptr) check(cuda().cuDevicePrimaryCtxRetain(&retained_[ordinal], ordinal), "retain");
    return retained_[ordinal];
  }
  // As the application's runtime after cudaSetDevice(ordinal).
  void work_on(int ordinal) { check(cuda().cuCtxSetCurrent(context_of(ordinal)), "cuCtxSetCurrent"); }
  static CUcontext current() {
    CUcontext now = nullptr;
    check(cuda().cuCtxGetCurrent(&now), "cuCtxGetCurrent");
    return now;
  }

  Config store_config(const std::string& capacity, const std::string& ordinal, const std::string& log = "off") {
    return Config::load("", {{"local.path", dir_.path() + "/l2"},
                             {"persistent.every", "0"},
                             {"device.backend", "cuda"},
                             {"device.capacity", capacity},
                             {"device.chunk", "4MiB"},
                             {"device.ordinal", ordinal},
                             {"buffer.pin_token_dir", ""},
                             {"log.level", log}});
  }

  int (*books_)(int, FakeCudaDeviceBooks*) = nullptr;
  CUcontext retained_[2] = {};
  TempDir dir_;
};

// Whether the store's L0 finished mapping within 5 seconds.
bool growth_done(const Store& store) {
  for (int tries = 0; tries < 500; ++tries) {
    if (store.device_stats().cache->growth_done) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

using DeviceBuffer = testing::CudaDeviceBuffer;

// The application works on device 0 and keeps its state on device 1; the
// store, told device.ordinal = 1, allocates and copies there alone (with L0
// and without), and leaves device 0's context current after every call.
TEST_F(FakeCudaDeviceOrdinalTest, OrdinalOneOfTwoTakesEveryAllocationAndCopy) {
  work_on(1);
  DeviceBuffer state(kRegionBytes);
  const std::vector<unsigned char> saved = random_bytes<unsigned char>(kRegionBytes, 7);
  state.upload(saved);
  work_on(0);
  const CUcontext application = current();
  for (const char* capacity : {"16MiB", "0"}) {
    SCOPED_TRACE(std::string("device.capacity ") + capacity);
    const std::uint64_t bytes_on_1 = books(1).device_bytes;
    const FakeCudaDeviceBooks before_0 = books(0), before_1 = books(1);
    {
      ::testing::internal::CaptureStderr();
      Store store(std::string("ordinal-") + capacity, store_config(capacity, "1", "info"));
      store.protect_device(0, state.get(), kRegionBytes, "state");
      const std::string log = ::testing::internal::GetCapturedStderr();
      EXPECT_NE(log.find("device regions through cuda (device 1: "), std::string::npos) << log;
      if (std::string(capacity) != "0") {
        EXPECT_NE(log.find("device cache on cuda-vmm (device 1: "), std::string::npos) << log;
      }
      store.checkpoint(1);
      store.wait();
      EXPECT_EQ(current(), application) << "checkpoint";
      if (std::string(capacity) != "0") {
        ASSERT_TRUE(store.device_stats().cache.has_value());
        EXPECT_EQ(store.device_stats().cache->device, 1);
        EXPECT_GE(books(1).device_bytes, bytes_on_1 + kRegionBytes) << "L0 is not on device 1";
      }
      EXPECT_GT(books(1).context_references, before_1.context_references) << "device 1's context is not retained";
      state.upload(std::vector<unsigned char>(kRegionBytes, 0));
      const FakeCudaDeviceBooks restarting_0 = books(0);
      EXPECT_EQ(store.restart(1), 1);
      EXPECT_EQ(current(), application) << "restart";
      EXPECT_EQ(books(0).copies, restarting_0.copies) << "restart copied in device 0's context";
    }
    EXPECT_EQ(current(), application) << "close";
    EXPECT_EQ(state.download(), saved);
    const FakeCudaDeviceBooks after_0 = books(0), after_1 = books(1);
    EXPECT_EQ(after_0.device_bytes, before_0.device_bytes) << "the store allocated on device 0";
    EXPECT_EQ(after_0.context_references, before_0.context_references);
    EXPECT_EQ(after_1.context_references, before_1.context_references) << "device 1's context is not released";
    EXPECT_EQ(after_1.device_bytes, bytes_on_1) << "the store left memory on device 1";
    // The test's own upload and download ran on device 0; every other copy on 1.
    EXPECT_EQ(after_0.copies - before_0.copies, 2u);
    EXPECT_GE(after_1.copies - before_1.copies, 2u) << "the capture and the restore";
  }
}

// A store on device 1 refuses a device region of device 0, naming both.
TEST_F(FakeCudaDeviceOrdinalTest, ARegionOfAnotherDeviceIsRefused) {
  work_on(0);
  DeviceBuffer on_0(kMiB);
  for (const char* capacity : {"16MiB", "0"}) {
    SCOPED_TRACE(std::string("device.capacity ") + capacity);
    Store store("ordinal", store_config(capacity, "1"));
    try {
      store.protect_device(0, on_0.get(), kMiB, "on-0");
      ADD_FAILURE() << "a region of device 0 was taken";
    } catch (const InvalidArgumentError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("it is on device 0"), std::string::npos) << message;
      EXPECT_NE(message.find("are on device 1 (device.ordinal"), std::string::npos) << message;
    }
  }
}

// auto: the application's current device wins; on a thread with none, the
// node-local rank modulo the visible devices.
TEST_F(FakeCudaDeviceOrdinalTest, AutoTakesTheNodeLocalRankModuloTheDevices) {
  Config::Device automatic;
  automatic.ordinal = kAutoDevice;
  for (const auto& [variable, rank, expected] :
       std::vector<std::tuple<const char*, const char*, int>>{{"OMPI_COMM_WORLD_LOCAL_RANK", "3", 1},
                                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "2", 0},
                                                             {"SLURM_LOCALID", "5", 1}}) {
    const ScopedVariable local_rank(variable, rank);
    EXPECT_EQ(gpu::store_device(automatic), expected) << variable << "=" << rank;
  }
  {
    const ScopedVariable local_rank("OMPI_COMM_WORLD_LOCAL_RANK", "3");
    {
      Store store("auto", store_config("8MiB", "auto"));
      ASSERT_TRUE(store.device_stats().cache.has_value());
      EXPECT_EQ(store.device_stats().cache->device, 1);
      ASSERT_TRUE(growth_done(store));
      EXPECT_GE(books(1).device_bytes, 4 * kMiB) << "L0 is not on device 1";
    }
    work_on(0);
    EXPECT_EQ(gpu::store_device(automatic), 0) << "the application's device 0 is current";
  }
  const ScopedVariable not_a_rank("OMPI_COMM_WORLD_LOCAL_RANK", "first");
  EXPECT_EQ(gpu::node_local_rank(), 0);
}

// An ordinal not below the visible devices: the open fails when L0 places
// the store's device there, the first device region when the store has no L0.
TEST_F(FakeCudaDeviceOrdinalTest, AnOrdinalBeyondTheVisibleDevicesIsRefusedWithTheCount) {
  const auto says_why = [](const std::string& message) {
    EXPECT_NE(message.find("on store 'beyond': configuration key 'device.ordinal'"), std::string::npos) << message;
    EXPECT_NE(message.find("device 2 is not visible: 2 CUDA devices are visible"), std::string::npos) << message;
  };
  try {
    Store store("beyond", store_config("8MiB", "2"));
    ADD_FAILURE() << "the open took device 2 of 2";
  } catch (const ConfigError& error) {
    says_why(error.what());
  }
  work_on(0);
  DeviceBuffer on_0(kMiB);
  Store store("beyond", store_config("0", "2"));
  try {
    store.protect_device(0, on_0.get(), kMiB, "state");
    ADD_FAILURE() << "the first device region took device 2 of 2";
  } catch (const ConfigError& error) {
    says_why(error.what());
  }
}

#endif  // RESURGO_HAVE_CUDA_HEADERS

}  // namespace
}  // namespace resurgo
