// Device regions at the Store's API, through the host backend
// (device.backend = host: host memory stands for device memory, so that the
// capture into L0, the bypass, staging and restart run without a GPU), and
// the faults of issue 9 that need no GPU. The round trip, I/O faults and
// eviction of device regions run in conformance_test.cpp (device_* kinds);
// the CUDA paths in gpu_cuda_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "base/units.h"
#include "capture/capture.h"
#include "capture/device_regions.h"
#include "capture/device_staging.h"
#include "gpu/device_access.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "gpu/cuda_driver.h"
#endif
#include "base/thread_pool.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

class DeviceRegionsTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.every", "0"},
                                               {"device.backend", "host"},
                                               {"device.capacity", "8MiB"},
                                               {"device.chunk", "2MiB"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  static std::vector<float> values(std::size_t n, int seed) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), static_cast<float>(seed * 1000));
    return v;
  }
  // In place: a protected region must not move.
  static void set(std::vector<float>& region, int seed) {
    std::iota(region.begin(), region.end(), static_cast<float>(seed * 1000));
  }
  TempDir dir;
};

TEST_F(DeviceRegionsTest, HostAndDeviceRegionsInAnyOrderRestoreFromEachVersion) {
  Store store("s", config({{"local.keep", "0"}}));
  std::vector<float> before = values(1000, 0), device_a = values(300000, 0), after = values(10, 0),
                     device_b = values(5000, 0);
  store.protect(0, before.data(), before.size() * 4, "before");
  store.protect_device(1, device_a.data(), device_a.size() * 4, "device_a", {"float32", {300000}});
  store.protect(2, after.data(), after.size() * 4, "after");
  store.protect_device(3, device_b.data(), device_b.size() * 4, "device_b");
  for (int version = 1; version <= 6; ++version) {
    for (auto* region : {&before, &device_a, &after, &device_b}) set(*region, version);
    store.checkpoint(version);
  }
  store.wait();
  for (int version : {6, 5, 3}) {
    for (auto* region : {&before, &device_a, &after, &device_b}) std::fill(region->begin(), region->end(), -1.0f);
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(device_a, values(device_a.size(), version));
    EXPECT_EQ(device_b, values(device_b.size(), version));
    EXPECT_EQ(before, values(before.size(), version));
    EXPECT_EQ(after, values(after.size(), version));
  }
  const VersionDescription description = store.describe(6);
  ASSERT_EQ(description.regions.size(), 4u);
  EXPECT_EQ(description.regions[0].kind, MemoryKind::kHost);
  EXPECT_EQ(description.regions[1].kind, MemoryKind::kDevice);
  EXPECT_EQ(description.regions[3].kind, MemoryKind::kDevice);
}

TEST_F(DeviceRegionsTest, DeviceMemoryFreedRightAfterCheckpointLeavesTheVersionIntact) {
  for (const char* capacity : {"8MiB", "0"}) {  // from L0, and copied to host memory without L0
    TempDir levels;
    Store store("s", config({{"device.capacity", capacity}, {"local.path", levels.path()}}));
    auto device = std::make_unique<std::vector<float>>(values(100000, 7));
    store.protect_device(0, device->data(), device->size() * 4, "field");
    store.checkpoint(1);
    store.unprotect(0);
    device.reset();  // the contract: free it once unprotected, even before the version is durable
    store.wait(1, kL2);
    std::vector<float> fresh(100000, -1.0f);
    store.protect_device(0, fresh.data(), fresh.size() * 4, "field");
    EXPECT_EQ(store.restart(1), 1) << "capacity " << capacity;
    EXPECT_EQ(fresh, values(100000, 7)) << "capacity " << capacity;
  }
}

TEST_F(DeviceRegionsTest, RestartCopiesDeviceRegionsStillInL0DeviceToDevice) {
  Store store("s", config({{"local.keep", "0"}}));  // L0 of 8 MiB holds the last 3 versions at most
  std::vector<float> host = values(100, 0), device = values(500000, 0);  // 2 MB
  store.protect(0, host.data(), host.size() * 4, "host");
  store.protect_device(1, device.data(), device.size() * 4, "device");
  for (int version = 1; version <= 6; ++version) {
    set(host, version);
    set(device, version);
    store.checkpoint(version);
  }
  store.wait();
  for (int version : {6, 5, 1}) {
    std::fill(host.begin(), host.end(), -1.0f);
    std::fill(device.begin(), device.end(), -1.0f);
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(host, values(host.size(), version));
    EXPECT_EQ(device, values(device.size(), version));
    const RestartReport report = store.last_restart();
    EXPECT_EQ(report.bytes, (host.size() + device.size()) * 4);
    // Version 1 was evicted from L0 by the newer ones: read from L2.
    EXPECT_EQ(report.bytes_from_device_cache, version == 1 ? 0 : device.size() * 4) << "version " << version;
  }
  // A restart of the newest intact version does not know it beforehand: from L2.
  EXPECT_EQ(store.restart(), 6);
  EXPECT_EQ(store.last_restart().bytes_from_device_cache, 0u);
}

TEST_F(DeviceRegionsTest, AVersionInL0WithOtherDeviceRegionsIsReadFromALevel) {
  Store store("s", config());
  std::vector<float> device = values(1000, 1);
  store.protect_device(0, device.data(), device.size() * 4, "field");
  store.checkpoint(1);
  store.wait();
  store.unprotect(0);
  std::vector<float> renamed(1000, 0.0f);
  store.protect_device(0, renamed.data(), renamed.size() * 4, "other");
  EXPECT_THROW(store.restart(1), MismatchError);  // the version holds 'field', not 'other'
  EXPECT_EQ(renamed, std::vector<float>(1000, 0.0f));
}

TEST_F(DeviceRegionsTest, AFailedRestartLeavesTheDeviceRegionsAsTheyWere) {
  Store store("s", config());
  std::vector<float> device = values(1000, 1);
  store.protect_device(0, device.data(), device.size() * 4, "field");
  store.checkpoint(1);
  store.wait();
  std::vector<float> other(10);
  store.protect(1, other.data(), other.size() * 4, "other");  // not in version 1: restart fails
  std::fill(device.begin(), device.end(), 5.0f);
  EXPECT_THROW(store.restart(1), MismatchError);
  EXPECT_EQ(device, std::vector<float>(1000, 5.0f));
}

TEST_F(DeviceRegionsTest, VersionsKeptInTheMemoryLevelHoldDeviceRegions) {
  Store store("s", config({{"memory.every", "1"}, {"local.every", "0"}, {"memory.capacity", "16MiB"}}));
  std::vector<float> device = values(200000, 1);
  store.protect_device(0, device.data(), device.size() * 4, "field");
  for (int version = 1; version <= 3; ++version) {
    set(device, version);
    store.checkpoint(version);
  }
  store.wait(kAllVersions, kL1);
  std::fill(device.begin(), device.end(), 0.0f);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_EQ(device, values(device.size(), 2));
}

TEST_F(DeviceRegionsTest, TheAutoCaptureRefusesDeviceRegions) {
  Store store("s", config({{"capture.mode", "auto"}}));
  std::vector<float> device(100);
  try {
    store.protect_device(0, device.data(), device.size() * 4, "field");
    ADD_FAILURE() << "a device region was accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("use capture.mode = fork"), std::string::npos) << error.what();
  }
}

// capture.mode = "fork" drains device regions to host memory, then forks
// (docs/gpu.md "Forked checkpoints of GPU state"); here through the host
// backend, the fake driver's case being ManagedForkTest's.
TEST_F(DeviceRegionsTest, TheForkCaptureDrainsDeviceRegionsThenForks) {
  Store store("s", config({{"capture.mode", "fork"}}));
  std::vector<float> device = values(100, 4), host = values(100, 5);
  const std::vector<float> device_saved = device, host_saved = host;
  store.protect_device(0, device.data(), device.size() * 4, "field");
  store.protect(1, host.data(), host.size() * 4, "h");
  store.checkpoint(1);
  std::fill(device.begin(), device.end(), -1.0f);
  std::fill(host.begin(), host.end(), -1.0f);
  store.wait();
  EXPECT_EQ(store.stats().at(0).capture, "fork");
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(device, device_saved);
  EXPECT_EQ(host, host_saved);
}

TEST_F(DeviceRegionsTest, WithoutAUsableDriverDeviceRegionsFailAndHostRegionsKeepWorking) {
#ifdef RESURGO_HAVE_CUDA_HEADERS
  if (gpu::CudaDriver::instance().available()) GTEST_SKIP() << "a CUDA driver is usable here";
#endif
  Store store("s", config({{"device.backend", "cuda"}}));
  std::vector<float> device(100), host = values(100, 3);
  try {
    store.protect_device(0, device.data(), device.size() * 4, "field");
    ADD_FAILURE() << "a device region was accepted without a GPU";
  } catch (const StorageError& error) {
    const std::string message = error.what();
    EXPECT_TRUE(message.find("libcuda") != std::string::npos || message.find("CUDA") != std::string::npos ||
                message.find("cuInit") != std::string::npos)
        << message;
  }
  store.protect(1, host.data(), host.size() * 4, "host");
  store.checkpoint(1);
  host.assign(100, 0.0f);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(host, values(100, 3));
}

TEST_F(DeviceRegionsTest, TheCApiProtectsDeviceRegions) {
  setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
  setenv("RESURGO_DEVICE_BACKEND", "host", 1);
  setenv("RESURGO_DEVICE_CAPACITY", "4MiB", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  std::vector<float> device = values(1000, 4);
  EXPECT_EQ(rsg_protect_device(store, 0, device.data(), device.size() * 4, "field"), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_protect_device(nullptr, 1, device.data(), 4, "x"), RSG_EINVAL);
  EXPECT_EQ(rsg_checkpoint(store, 1), RSG_OK) << rsg_last_error();
  std::fill(device.begin(), device.end(), 0.0f);
  int restored = -1;
  EXPECT_EQ(rsg_restart(store, RSG_LATEST, &restored), RSG_OK) << rsg_last_error();
  EXPECT_EQ(restored, 1);
  EXPECT_EQ(device, values(1000, 4));
  EXPECT_EQ(rsg_close(store), RSG_OK);
  unsetenv("RESURGO_LOCAL_PATH");
  unsetenv("RESURGO_DEVICE_BACKEND");
  unsetenv("RESURGO_DEVICE_CAPACITY");
}

TEST_F(DeviceRegionsTest, StatsSayWhereEachVersionWentAndWhatTheCachesDid) {
  Store store("s", config({{"buffer.pin", "off"}, {"buffer.touch", "sequential"}}));
  EXPECT_TRUE(store.device_stats().cache.has_value()) << "L0 is opened with the store";
  EXPECT_FALSE(store.device_stats().staging.has_value()) << "the staging buffer comes with the first device capture";
  std::vector<float> host = values(100, 0), small = values(1000, 1), large = values(3 * kMiB, 2);  // 12 MiB > L0
  store.protect(0, host.data(), host.size() * 4, "host");
  store.protect_device(1, small.data(), small.size() * 4, "small");
  store.checkpoint(1);
  store.protect_device(2, large.data(), large.size() * 4, "large");
  store.checkpoint(2);
  store.unprotect(1);
  store.unprotect(2);
  store.checkpoint(3);
  store.wait();

  std::map<int, VersionStats> by_version;
  for (const VersionStats& stats : store.stats()) by_version[stats.version] = stats;
  EXPECT_EQ(by_version.at(1).device_path, "l0");
  EXPECT_EQ(by_version.at(1).device_bytes, small.size() * 4);
  EXPECT_EQ(by_version.at(1).bytes, (host.size() + small.size()) * 4);
  EXPECT_EQ(by_version.at(2).device_path, "host") << "12 MiB does not fit in 8 MiB of L0";
  EXPECT_EQ(by_version.at(2).device_bytes, (small.size() + large.size()) * 4);
  EXPECT_EQ(by_version.at(3).device_path, "");
  EXPECT_EQ(by_version.at(3).device_bytes, 0u);
  EXPECT_GE(by_version.at(1).device_wait_seconds, 0.0);
  EXPECT_LE(by_version.at(1).device_wait_seconds, by_version.at(1).copy_seconds);

  const DeviceStats device = store.device_stats();
  ASSERT_TRUE(device.cache.has_value());
  EXPECT_EQ(device.cache->capacity, 8 * kMiB);
  EXPECT_EQ(device.cache->bypassed, 1u);
  EXPECT_EQ(device.cache->versions + device.cache->evicted, 1u);
  ASSERT_TRUE(device.staging.has_value());
  EXPECT_EQ(device.staging->pin, PinPolicy::kOff);
  EXPECT_EQ(device.staging->touch, TouchSetting::kSequential);
  EXPECT_EQ(device.staging->strategy, TouchStrategy::kSequential);
  EXPECT_EQ(device.staging->checkpoints, 2u) << "each checkpoint of device regions feeds the touch model";
  EXPECT_FALSE(device.staging->pinned);
}

TEST_F(DeviceRegionsTest, TheCApiReportsTheDeviceCaches) {
  setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
  setenv("RESURGO_DEVICE_BACKEND", "host", 1);
  setenv("RESURGO_DEVICE_CAPACITY", "4MiB", 1);
  setenv("RESURGO_BUFFER_PIN", "off", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  rsg_device_caches caches;
  ASSERT_EQ(rsg_device_stats(store, &caches), RSG_OK) << rsg_last_error();
  EXPECT_EQ(caches.has_cache, 1);
  EXPECT_EQ(caches.cache_capacity, 4 * kMiB);
  EXPECT_EQ(caches.has_staging, 0);
  std::vector<float> device = values(1000, 4);
  ASSERT_EQ(rsg_protect_device(store, 0, device.data(), device.size() * 4, "field"), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_checkpoint(store, 1), RSG_OK) << rsg_last_error();
  ASSERT_EQ(rsg_wait(store, RSG_ALL, RSG_L2), RSG_OK) << rsg_last_error();
  rsg_version_stats stats;
  ASSERT_EQ(rsg_stats(store, 1, &stats), RSG_OK) << rsg_last_error();
  EXPECT_STREQ(stats.device_path, "l0");
  EXPECT_EQ(stats.device_bytes, 4000u);
  ASSERT_EQ(rsg_device_stats(store, &caches), RSG_OK) << rsg_last_error();
  EXPECT_EQ(caches.has_staging, 1);
  EXPECT_STREQ(caches.pin, "off");
  EXPECT_STREQ(caches.touch, "auto");
  EXPECT_EQ(caches.checkpoints, 1u);
  EXPECT_EQ(rsg_device_stats(store, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  for (const char* name : {"RESURGO_LOCAL_PATH", "RESURGO_DEVICE_BACKEND", "RESURGO_DEVICE_CAPACITY",
                           "RESURGO_BUFFER_PIN"}) {
    unsetenv(name);
  }
}

// DeviceRegions alone, over an L0 of its own: what goes through L0 and what bypasses it.
class DeviceCaptureTest : public DeviceRegionsTest {
 protected:
  // A staging fill that copies from `source` as a device-to-host copy would.
  static DeviceStaging::Fill copy_from(const std::vector<float>& source) {
    return [&source](std::uint64_t offset, std::byte* target, std::uint64_t bytes) {
      std::memcpy(target, reinterpret_cast<const std::byte*>(source.data()) + offset, bytes);
    };
  }
  static Region device_region(int id, std::vector<float>& data) {
    Region region;
    region.id = id;
    region.label = "d" + std::to_string(id);
    region.data = reinterpret_cast<std::byte*>(data.data());
    region.bytes = data.size() * sizeof(float);
    region.kind = MemoryKind::kDevice;
    return region;
  }
  const Logger log{"d", LogLevel::kOff};
};

TEST_F(DeviceCaptureTest, AVersionLargerThanL0IsCopiedToHostAtOnceAndTheCacheCountsTheBypass) {
  const Config small = config({{"device.capacity", "1MiB"}, {"device.chunk", "1MiB"}});
  DeviceLevel l0("d", 0, small.device, 0, log);
  DeviceRegions capture(small, &l0, 0, log);
  std::vector<float> large = values(2 * kMiB / 4, 1), fits = values(1000, 2);
  format::Header header;
  header.version = 1;
  header.regions.resize(1);
  CaptureTimes times;
  const std::vector<Region> regions{device_region(0, large)};
  ThreadPool pool(1);
  const std::unique_ptr<Capture> host = make_capture(CaptureContext{small, pool, log, [](bool) {}});
  MemoryLevel level("d", 0, 4 * kMiB, 0);
  Snapshot bypassed = capture.take(*host, regions, header, level, times);
  EXPECT_FALSE(bypassed.stage);
  ASSERT_EQ(bypassed.extents.size(), 1u);
  EXPECT_EQ(std::memcmp(bypassed.extents[0].source, large.data(), large.size() * 4), 0);
  bypassed.release();
  EXPECT_EQ(capture.stats().cache->bypassed, 1u);

  header.version = 2;
  Snapshot cached = capture.take(*host, {device_region(0, fits)}, header, level, times);
  ASSERT_TRUE(cached.stage);
  EXPECT_EQ(cached.extents[0].source, nullptr);
  std::fill(fits.begin(), fits.end(), 0.0f);  // the cache holds its own copy
  cached.stage(cached.extents);
  EXPECT_EQ(std::memcmp(cached.extents[0].source, values(1000, 2).data(), 4000), 0);
  cached.release();
  EXPECT_EQ(capture.stats().cache->versions, 1u);
}

TEST_F(DeviceCaptureTest, AVersionNumberStillInL0FromBeforeARestartBypassesIt) {
  const Config with_l0 = config();
  DeviceLevel l0("d", 0, with_l0.device, 0, log);
  DeviceRegions capture(with_l0, &l0, 0, log);
  ThreadPool pool(1);
  const std::unique_ptr<Capture> host = make_capture(CaptureContext{with_l0, pool, log, [](bool) {}});
  MemoryLevel level("d", 0, 4 * kMiB, 0);
  std::vector<float> device = values(1000, 1);
  const std::vector<Region> regions{device_region(0, device)};
  format::Header header;
  header.version = 3;
  header.regions.resize(1);
  CaptureTimes times;
  Snapshot first = capture.take(*host, regions, header, level, times);
  first.stage(first.extents);
  first.release();
  EXPECT_TRUE(capture.cached(3, regions));

  set(device, 2);  // version 3 again, other bytes (a restart fell back past the first one)
  Snapshot again = capture.take(*host, regions, header, level, times);
  EXPECT_FALSE(again.stage) << "the stale copy in L0 must not stand for the new version";
  EXPECT_EQ(std::memcmp(again.extents[0].source, values(1000, 2).data(), 4000), 0);
  again.release();
  EXPECT_FALSE(capture.cached(3, regions));
}

// The host buffer device regions are staged in: the late-pin buffer.
TEST_F(DeviceCaptureTest, StagingFillsTheLatePinBufferWhichPinsOnceEveryPageIsTouched) {
  TempDir token_dir;
  const Config lazy = config({{"buffer.pin", "lazy"}, {"buffer.pin_token_dir", token_dir.path()}});
  DeviceStaging staging(lazy, 8 * kMiB, gpu::open_host_pinner(DeviceBackend::kHost), log);
  const std::vector<float> source = values(kMiB / 4, 3);
  const std::unique_ptr<DeviceStaging::Block> block = staging.stage(kMiB, copy_from(source));
  EXPECT_EQ(std::memcmp(block->data(), source.data(), kMiB), 0);
  for (int polls = 0; polls < 6000 && !staging.stats().pinned &&
                      staging.stats().state != LatePinState::kPinFailed;
       ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const LatePinStats stats = staging.stats();
  EXPECT_TRUE(stats.pinned || stats.state == LatePinState::kPinFailed) << to_string(stats.state);
  EXPECT_EQ(stats.touched_bytes, stats.capacity);
  EXPECT_EQ(stats.flushes, 1u);
}

TEST_F(DeviceCaptureTest, AVersionLargerThanTheStagingBufferIsStagedInMemoryOfItsOwn) {
  DeviceStaging staging(config({{"buffer.pin", "off"}}), 2 * kMiB, gpu::open_host_pinner(DeviceBackend::kHost), log);
  const std::vector<float> source = values(kMiB, 5);  // 4 MiB
  const std::unique_ptr<DeviceStaging::Block> block = staging.stage(4 * kMiB, copy_from(source));
  EXPECT_EQ(std::memcmp(block->data(), source.data(), 4 * kMiB), 0);
  EXPECT_EQ(staging.stats().flushes, 0u);  // not through the buffer
}

// Pins nothing; its pieces are 1 MiB, so a buffer of 4 MiB has 4.
class OneMiBPieces : public gpu::HostPinner {
 public:
  std::string name() const override { return "1 MiB pieces"; }
  std::size_t max_piece() const override { return kMiB; }
  void pin(void*, std::size_t) override {}
  void unpin(void*, std::size_t) noexcept override {}
};

// While a buffer is being pinned one piece may be registered and the next
// not, and the CUDA driver refuses a copy over both (CUDA_ERROR_INVALID_VALUE):
// each device-to-host copy stays within one piece.
TEST_F(DeviceCaptureTest, StagingNeverCopiesAcrossAPinPiece) {
  DeviceStaging staging(config({{"buffer.pin", "off"}}), 4 * kMiB, std::make_unique<OneMiBPieces>(), log);
  const std::vector<float> source = values(3 * kMiB / 4 + 100, 6);  // 3 MiB + 400 bytes
  const std::uint64_t bytes = source.size() * sizeof(float);
  const std::unique_ptr<DeviceStaging::Block> first = staging.stage(kMiB / 2, copy_from(source));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> copies;  // (offset in the buffer, bytes)
  const std::unique_ptr<DeviceStaging::Block> second =
      staging.stage(bytes, [&](std::uint64_t offset, std::byte* target, std::uint64_t length) {
        copies.emplace_back(kMiB / 2 + offset, length);
        copy_from(source)(offset, target, length);
      });
  EXPECT_EQ(std::memcmp(second->data(), source.data(), bytes), 0);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected{
      {kMiB / 2, kMiB / 2}, {kMiB, kMiB}, {2 * kMiB, kMiB}, {3 * kMiB, kMiB / 2 + 400}};
  EXPECT_EQ(copies, expected);
}

}  // namespace
}  // namespace resurgo
