// A version records the device that held each managed region, and restart
// prefetches the region back there (issue 29 part 2; docs/gpu.md "Managed
// memory", docs/format.md "Header"). Against the fake CUDA driver with two
// devices, which reports the last prefetch location of an allocation
// (cuMemRangeGetAttribute) and remembers where each was prefetched
// (fake_cuda_prefetch_location); skips where libcuda.so.1 is not the fake.
#ifdef RESURGO_HAVE_CUDA_HEADERS

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_calls.h"
#include "fake_cuda_lookup.h"
#include "format/container.h"
#include "format/file_names.h"
#include "gpu/cuda_driver.h"
#include "io/bytes_file.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo::gpu {
namespace {

constexpr char kStore[] = "recorded";

class ManagedRecordedDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fake().control) GTEST_SKIP() << fake().why_not;
    location_ = fake_function<decltype(&fake_cuda_prefetch_location)>("fake_cuda_prefetch_location");
    ASSERT_NE(location_, nullptr) << "libcuda.so.1 is an older build of the fake";
    FakeCudaCounters before = {};
    ASSERT_EQ(fake().control->reset(&before), 0u) << "left by an earlier test: " << describe(before);
    ASSERT_EQ(fake().control->set_device_count(2), 0);
    check(cuda().cuDevicePrimaryCtxRetain(&context_, 0), "cuDevicePrimaryCtxRetain");
    check(cuda().cuCtxSetCurrent(context_), "cuCtxSetCurrent");
    check(cuda().cuMemAllocManaged(&managed_, kBytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  }
  void TearDown() override {
    if (!fake().control) return;
    if (managed_ != 0) cuda().cuMemFree(managed_);
    EXPECT_EQ(finish_fake_turn(context_), "");
  }
  unsigned char* managed() const { return reinterpret_cast<unsigned char*>(managed_); }

  // The application moves the region: to a device, or to the host (CU_DEVICE_CPU).
  void prefetch(int device) {
#if CUDA_VERSION >= 13000
    CUmemLocation where{};
    where.type = device == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    where.id = device == CU_DEVICE_CPU ? 0 : device;
    check(cuda().cuMemPrefetchAsync(managed_, kBytes, where, 0, nullptr), "cuMemPrefetchAsync");
#else
    check(cuda().cuMemPrefetchAsync(managed_, kBytes, device, nullptr), "cuMemPrefetchAsync");
#endif
  }

  Config config(const std::string& l0 = "0", const std::map<std::string, std::string>& more = {}) const {
    return cuda_store_config(dir_.path(), l0, more);
  }
  // Version 1 of a store holding the region, filled with `fill`.
  void checkpoint(Store& store, unsigned char fill) {
    std::memset(managed(), fill, kBytes);
    store.protect_managed(0, managed(), kBytes, "m");
    store.checkpoint(1);
    store.wait();
  }
  // A fresh store restarts version 1 from its file.
  void restart(const std::map<std::string, std::string>& more = {}) {
    std::memset(managed(), 0, kBytes);
    Store store(kStore, config("0", more));
    store.protect_managed(0, managed(), kBytes, "m");
    EXPECT_EQ(store.restart(1), 1);
    EXPECT_EQ(std::vector<unsigned char>(managed(), managed() + kBytes), std::vector<unsigned char>(kBytes, 9));
  }

  std::string file() const { return dir_.path() + "/l2/" + kStore + "/" + format::container_file_name(1, 0); }
  std::vector<std::byte> bytes() const {
    std::ifstream in(file(), std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    std::memcpy(out.data(), chars.data(), chars.size());
    return out;
  }
  std::uint32_t format_version() const {
    std::uint32_t version = 0;
    std::memcpy(&version, bytes().data() + 8, sizeof version);
    return version;
  }
  format::Container container() const {
    const BytesFile file(bytes(), "version 1");
    return format::read_container(file);
  }
  // Writes version 1 anew with the managed region recording `device`, as a
  // writer that recorded it would have (kDeviceUnknown: the version 2
  // layout of releases before the record).
  void rewrite_recording(std::int32_t device) const {
    const std::vector<std::byte> old = bytes();
    const BytesFile source(old, "version 1");
    format::Container read = format::read_container(source);
    read.header.regions[0].device = device;
    BytesFile out("version 1 rewritten");
    format::ContainerWriter writer(out, read.header);
    for (const format::ChunkRecord& chunk : read.chunks) writer.add_chunk(chunk, old.data() + chunk.file_offset);
    writer.finish();
    std::ofstream(file(), std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(out.bytes().data()), static_cast<std::streamsize>(out.bytes().size()));
  }

  static constexpr std::size_t kBytes = 96 * 1024 + 5;
  decltype(&fake_cuda_prefetch_location) location_ = nullptr;
  CUcontext context_ = nullptr;
  CUdeviceptr managed_ = 0;
  TempDir dir_;
};

// Through a level and through L0, in copy and fork mode: the version
// records device 1, and restart prefetches the region there, not to the
// store's device 0.
TEST_F(ManagedRecordedDeviceTest, RestartPrefetchesTheRegionToTheDeviceThatHeldIt) {
  for (const char* mode : {"copy", "fork"}) {
    for (const char* l0 : {"0", "16MiB"}) {
      const std::string what = std::string(mode) + ", L0 " + l0;
      TempDir levels;
      Store store("held", cuda_store_config(levels.path(), l0, {{"capture.mode", mode}}));
      prefetch(1);
      checkpoint(store, 9);
      const std::string path = levels.path() + "/l2/held/" + format::container_file_name(1, 0);
      const std::unique_ptr<ReadableFile> written = Env::posix()->open(path);
      EXPECT_EQ(format::read_container(*written).header.regions[0].device, 1) << what;
      prefetch(0);  // the application moved it since
      std::memset(managed(), 0, kBytes);
      EXPECT_EQ(store.restart(1), 1) << what;
      EXPECT_EQ(location_(managed()), 1) << what << ": not prefetched to the device that held it";
      EXPECT_EQ(std::vector<unsigned char>(managed(), managed() + kBytes), std::vector<unsigned char>(kBytes, 9))
          << what;
      store.close();
    }
  }
}

// Last put on the host: recorded so, and restart leaves it there (no
// prefetch at all).
TEST_F(ManagedRecordedDeviceTest, ARegionLastPutOnTheHostIsNotPrefetched) {
  {
    Store store(kStore, config());
    prefetch(CU_DEVICE_CPU);
    checkpoint(store, 9);
  }
  EXPECT_EQ(format_version(), format::kDeviceFormatVersion);
  EXPECT_EQ(container().header.regions[0].device, format::kDeviceHost);
  prefetch(1);
  const std::uint64_t prefetches = fake().control->calls("cuMemPrefetchAsync");
  restart();
  EXPECT_EQ(fake().control->calls("cuMemPrefetchAsync"), prefetches);
  EXPECT_EQ(location_(managed()), 1) << "moved by the restart";
}

// Never prefetched, the driver cannot say where it is: nothing recorded,
// the version 2 layout, and restart puts it on the store's device.
TEST_F(ManagedRecordedDeviceTest, ARegionTheDriverCannotPlaceIsWrittenAsVersion2) {
  {
    Store store(kStore, config());
    checkpoint(store, 9);
  }
  EXPECT_EQ(format_version(), format::kFormatVersion);
  EXPECT_EQ(container().header.regions[0].device, format::kDeviceUnknown);
  restart();
  EXPECT_EQ(location_(managed()), 0);
}

// A file of the releases before the record (version 2) restarts as they
// did: to the store's device.
TEST_F(ManagedRecordedDeviceTest, AVersion2FileRestartsOnTheStoresDevice) {
  {
    Store store(kStore, config());
    prefetch(1);
    checkpoint(store, 9);
  }
  rewrite_recording(format::kDeviceUnknown);
  ASSERT_EQ(format_version(), 2u);
  restart();
  EXPECT_EQ(location_(managed()), 0);
}

// An ordinal beyond the devices there are (a damaged or foreign file, fewer
// visible devices) is never used: the region goes to the store's device,
// and one line names it and the version.
TEST_F(ManagedRecordedDeviceTest, AnOrdinalBeyondTheDevicesFallsBackToTheStoresDeviceNamed) {
  {
    Store store(kStore, config());
    prefetch(1);
    checkpoint(store, 9);
  }
  rewrite_recording(7);
  ::testing::internal::CaptureStderr();
  restart({{"log.level", "warn"}});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(location_(managed()), 0);
  EXPECT_NE(log.find("managed region 'm' of version 1 was on device 7, and 2 devices are visible; it is prefetched "
                     "to the store's device 0 instead"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace resurgo::gpu

#endif  // RESURGO_HAVE_CUDA_HEADERS
