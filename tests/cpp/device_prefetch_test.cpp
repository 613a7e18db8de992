// Prefetch into the L0 device cache for the backward pass (issue 30, part
// 2; docs/adjoint.md, "Backward pass on the device"), through the host
// backend (host memory stands for device memory): the order of staging,
// restarts served from L0, discard freeing L0 at once, and a version too
// large for L0. The CUDA paths (device-to-device copies counted by the
// driver, driver faults, a discard under a copy in flight) run against the
// fake driver in device_prefetch_fake_cuda_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

constexpr std::size_t kDeviceFloats = 16384;  // 64 KiB: four versions in a 256 KiB L0
constexpr std::uint64_t kDeviceBytes = kDeviceFloats * sizeof(float);

class DevicePrefetchTest : public ::testing::Test {
 protected:
  Config config(const std::string& l0_capacity) {
    return Config::load("", {{"local.path", dir.path() + "/l2"},
                             {"local.keep", "0"},
                             {"persistent.every", "0"},
                             {"device.backend", "host"},
                             {"device.capacity", l0_capacity},
                             {"device.chunk", l0_capacity},
                             {"log.level", "off"}});
  }
  void protect(Store& store) {
    store.protect(0, host.data(), host.size() * sizeof(float), "host");
    store.protect_device(1, device.data(), device.size() * sizeof(float), "device");
  }
  static void fill(std::vector<float>& region, int version) {
    std::iota(region.begin(), region.end(), static_cast<float>(version * 100000));
  }
  bool holds_version(int version) {
    std::vector<float> expected_host(host.size()), expected_device(device.size());
    fill(expected_host, version);
    fill(expected_device, version);
    return host == expected_host && device == expected_device;
  }
  // Versions 1..count written by a store closed since: L0 starts empty at
  // the next open, and every version is on L2 only.
  void write_versions(const Config& with, int count) {
    Store store("s", with);
    protect(store);
    for (int version = 1; version <= count; ++version) {
      fill(host, version);
      fill(device, version);
      store.checkpoint(version);
    }
    store.wait();
  }
  static DeviceCacheStats l0(Store& store) {
    const std::optional<DeviceCacheStats> cache = store.device_stats().cache;
    EXPECT_TRUE(cache.has_value());
    return cache.value_or(DeviceCacheStats{});
  }
  void scramble() {
    std::fill(host.begin(), host.end(), -1.0f);
    std::fill(device.begin(), device.end(), -1.0f);
  }

  TempDir dir;
  std::vector<float> host = std::vector<float>(1000);
  std::vector<float> device = std::vector<float>(kDeviceFloats);
};

// L0 holds four versions: the first four of the order are staged, and
// nothing else while none of them was restored.
TEST_F(DevicePrefetchTest, StagesTheFirstVersionsOfTheOrderAndRestartsCopyThemFromL0) {
  const Config with = config("256KiB");
  write_versions(with, 6);
  Store store("s", with);
  protect(store);
  store.prefetch({6, 5, 4, 3, 2, 1});
  ASSERT_TRUE(eventually([&] { return l0(store).prefetched == 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(l0(store).prefetched, 4u);  // 2 and 1 wait for room
  EXPECT_EQ(l0(store).versions, 4u);
  for (int version : {3, 4, 5, 6}) {
    scramble();
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(holds_version(version)) << version;
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes) << version;
  }
  EXPECT_EQ(l0(store).restored_from_prefetch, 4u);
}

// The adjoint loop: restore, then discard. Each discard frees L0 at once,
// and the next version of the order takes the room.
TEST_F(DevicePrefetchTest, DiscardFreesL0AtOnceForTheNextVersionOfTheOrder) {
  const Config with = config("256KiB");
  write_versions(with, 6);
  Store store("s", with);
  protect(store);
  store.prefetch({6, 5, 4, 3, 2, 1});
  for (int version = 6; version >= 1; --version) {
    const std::uint64_t staged = std::min<std::uint64_t>(6, 4 + (6 - version));
    ASSERT_TRUE(eventually([&] { return l0(store).prefetched == staged; })) << version;
    scramble();
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(holds_version(version)) << version;
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes) << version;
    const std::size_t used = l0(store).used;
    store.discard(version);
    // While versions wait, the next one takes the room at once (the wait at
    // the top of the loop); once none waits, the room stays free.
    if (version <= 2) {
      EXPECT_EQ(l0(store).used, used - kDeviceBytes) << version;
    }
  }
  EXPECT_EQ(l0(store).restored_from_prefetch, 6u);
  EXPECT_EQ(l0(store).versions, 0u);
}

// Device regions larger than L0: counted, and restored from host memory
// (the memory level, where the prefetch still brings the version).
TEST_F(DevicePrefetchTest, AVersionLargerThanL0IsRestoredFromHostMemory) {
  const Config with = config("32KiB");
  write_versions(with, 2);
  Store store("s", with);
  protect(store);
  store.prefetch({2, 1});
  ASSERT_TRUE(eventually([&] { return l0(store).prefetch_too_large == 2; }));
  ASSERT_TRUE(eventually([&] {
    for (const VersionInfo& info : store.versions()) {
      if (info.version == 1 && std::count(info.levels.begin(), info.levels.end(), kL1) == 1) return true;
    }
    return false;
  }));
  for (int version : {2, 1}) {
    scramble();
    EXPECT_EQ(store.restart(version), version);
    EXPECT_TRUE(holds_version(version)) << version;
    EXPECT_EQ(store.last_restart().bytes_from_device_cache, 0u);
    EXPECT_EQ(store.last_restart().level, kL1);
  }
  EXPECT_EQ(l0(store).prefetched, 0u);
  EXPECT_EQ(l0(store).restored_from_prefetch, 0u);
}

// The device regions protected at prefetch() are those staged: a restart
// after they changed reads the version from the levels.
TEST_F(DevicePrefetchTest, ARestartAfterTheDeviceRegionsChangedReadsTheLevels) {
  const Config with = config("256KiB");
  write_versions(with, 1);
  Store store("s", with);
  protect(store);
  store.prefetch({1});
  ASSERT_TRUE(eventually([&] { return l0(store).prefetched == 1; }));
  std::vector<float> other(kDeviceFloats);
  store.unprotect(1);
  store.protect_device(2, other.data(), other.size() * sizeof(float), "other");
  EXPECT_THROW(store.restart(1), MismatchError);  // the checkpoint holds "device", not "other"
  store.unprotect(2);
  store.protect_device(1, device.data(), device.size() * sizeof(float), "device");
  scramble();
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_TRUE(holds_version(1));
  EXPECT_EQ(store.last_restart().bytes_from_device_cache, kDeviceBytes);  // the same layout again
}

// The C API's device statistics carry the prefetch's counters.
TEST_F(DevicePrefetchTest, TheCApiCountsWhatThePrefetchStagedAndWhatRestartCopiedFromIt) {
  write_versions(config("256KiB"), 3);
  const std::map<std::string, std::string> settings = {
      {"RESURGO_LOCAL_PATH", dir.path() + "/l2"}, {"RESURGO_LOCAL_KEEP", "0"},
      {"RESURGO_PERSISTENT_EVERY", "0"},          {"RESURGO_DEVICE_BACKEND", "host"},
      {"RESURGO_DEVICE_CAPACITY", "256KiB"},      {"RESURGO_DEVICE_CHUNK", "256KiB"},
      {"RESURGO_LOG_LEVEL", "off"}};
  for (const auto& [name, value] : settings) setenv(name.c_str(), value.c_str(), 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "s", &store), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_protect(store, 0, host.data(), host.size() * sizeof(float), "host"), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_protect_device(store, 1, device.data(), device.size() * sizeof(float), "device"), RSG_OK)
      << rsg_last_error();
  const int order[] = {3, 2};
  ASSERT_EQ(rsg_prefetch(store, order, 2), RSG_OK) << rsg_last_error();
  rsg_device_caches caches = {};
  EXPECT_TRUE(eventually([&] { return rsg_device_stats(store, &caches) == RSG_OK && caches.cache_prefetched == 2; }));
  int restored = 0;
  scramble();
  ASSERT_EQ(rsg_restart(store, 3, &restored), RSG_OK) << rsg_last_error();
  EXPECT_EQ(restored, 3);
  EXPECT_TRUE(holds_version(3));
  ASSERT_EQ(rsg_device_stats(store, &caches), RSG_OK) << rsg_last_error();
  EXPECT_EQ(caches.cache_device, 0);
  EXPECT_EQ(caches.cache_restored_from_prefetch, 1u);
  EXPECT_EQ(caches.cache_prefetch_too_large, 0u);
  EXPECT_EQ(caches.cache_prefetch_failed, 0u);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  for (const auto& [name, value] : settings) unsetenv(name.c_str());
}

}  // namespace
}  // namespace resurgo
