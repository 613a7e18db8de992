// Pinned pieces of the L1 memory level (issue 30, part 3; docs/gpu.md,
// "Pinned versions in memory"). MemoryLevelPinningTest drives the level's
// PiecePinner hook with a recording pinner (no driver): pieces pinned once
// written, once each, unpinned with the level, no more after a failure; and
// the in-place reader cut at piece bounds. InPlaceDeviceCopyTest checks the
// verified copy of device regions out of L1 with the host backend.
// FakeCudaPinnedMemoryLevelTest runs stores over the fake CUDA driver:
// restores of retained versions copy host to device straight from
// registered pieces (the fake counts where each copy's host side lay, and
// refuses a copy over two registrations), a failed registration leaves
// them pageable and says so once, a failed copy fails that restart only,
// and a store without device regions registers nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "capture/device_memory_level.h"
#include "format/container.h"
#include "gpu/device_access.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "tier/memory_level.h"
#ifdef RESURGO_HAVE_CUDA_HEADERS
#include "fake_device_test.h"
#endif

namespace resurgo {
namespace {

constexpr std::uint64_t kPiece = 2u << 20;  // the memory level's

std::vector<std::byte> pattern(std::uint64_t bytes, int seed) {
  std::vector<std::byte> data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + i / 4093 + seed) & 0xff);
  return data;
}

// Records pins and unpins; fails the pin numbered `fail_at` (from 1) when set.
struct PinBook {
  std::map<void*, std::size_t> pinned;
  int pins = 0;
  int unpins = 0;
  int fail_at = 0;

  MemoryLevel::PiecePinner hook() {
    MemoryLevel::PiecePinner pinner;
    pinner.pin = [this](void* data, std::size_t bytes) {
      if (++pins == fail_at) return false;
      EXPECT_EQ(pinned.count(data), 0u) << "pinned twice";
      pinned[data] = bytes;
      return true;
    };
    pinner.unpin = [this](void* data, std::size_t bytes) {
      ++unpins;
      EXPECT_EQ(pinned[data], bytes);
      pinned.erase(data);
    };
    return pinner;
  }
};

void commit_bytes(MemoryLevel& level, int version, const std::vector<std::byte>& bytes) {
  level.commit(version, [&](WritableFile& file) { file.append(bytes.data(), bytes.size()); });
}

TEST(MemoryLevelPinningTest, PiecesArePinnedOnceWrittenOnceEachAndUnpinnedWithTheLevel) {
  PinBook book;
  {
    MemoryLevel level("s", 0, 8 * kPiece, 0);
    commit_bytes(level, 1, pattern(kPiece / 2, 1));
    EXPECT_EQ(book.pins, 0) << "nothing pinned before the hook";
    level.pin_pieces(book.hook());
    commit_bytes(level, 2, pattern(2 * kPiece + 10, 2));  // three pieces
    EXPECT_EQ(book.pins, 3);
    EXPECT_EQ(level.pinned_bytes(), 3 * kPiece);
    level.remove(2);
    commit_bytes(level, 3, pattern(kPiece + 1, 3));  // two reused pieces, pinned already
    EXPECT_EQ(book.pins, 3);
    EXPECT_EQ(book.unpins, 0);
  }
  EXPECT_EQ(book.unpins, 3);
  EXPECT_TRUE(book.pinned.empty());
}

TEST(MemoryLevelPinningTest, UnpinningGivesEveryPieceBackAndPinsNoMore) {
  PinBook book;
  MemoryLevel level("s", 0, 8 * kPiece, 0);
  level.pin_pieces(book.hook());
  commit_bytes(level, 1, pattern(kPiece + 1, 1));
  level.unpin_pieces();
  EXPECT_EQ(book.unpins, 2) << "pieces held by a version too";
  EXPECT_EQ(level.pinned_bytes(), 0u);
  commit_bytes(level, 2, pattern(kPiece, 2));
  EXPECT_EQ(book.pins, 2);
  std::vector<std::byte> back(kPiece + 1);
  level.open(1)->read_at(0, back.data(), back.size());
  EXPECT_EQ(back, pattern(kPiece + 1, 1));
}

TEST(MemoryLevelPinningTest, AfterAFailedPinNoMorePiecesArePinned) {
  PinBook book;
  book.fail_at = 2;
  {
    MemoryLevel level("s", 0, 8 * kPiece, 0);
    level.pin_pieces(book.hook());
    commit_bytes(level, 1, pattern(3 * kPiece, 1));
    EXPECT_EQ(book.pins, 2) << "the third piece was not tried";
    commit_bytes(level, 2, pattern(kPiece, 2));
    EXPECT_EQ(book.pins, 2);
    EXPECT_EQ(level.pinned_bytes(), kPiece);
    std::vector<std::byte> back(3 * kPiece);
    level.open(1)->read_at(0, back.data(), back.size());
    EXPECT_EQ(back, pattern(3 * kPiece, 1)) << "pageable pieces read as before";
  }
  EXPECT_EQ(book.unpins, 1);
}

TEST(MemoryLevelPinningTest, TheInPlaceReaderCutsAtPieceBoundsAndChecksumsInPlace) {
  PinBook book;
  MemoryLevel level("s", 0, 8 * kPiece, 0);
  level.pin_pieces(book.hook());
  const std::vector<std::byte> bytes = pattern(2 * kPiece + 100, 7);
  commit_bytes(level, 1, bytes);
  EXPECT_EQ(level.open_in_place(2), nullptr);
  const std::unique_ptr<MemoryLevel::Reader> reader = level.open_in_place(1);
  ASSERT_NE(reader, nullptr);
  const std::uint64_t offset = kPiece - 10;
  const std::uint64_t length = kPiece + 20;  // over two bounds
  std::vector<std::uint64_t> spans;
  std::vector<std::byte> gathered;
  reader->for_each_span(offset, length, [&](const std::byte* data, std::uint64_t span) {
    spans.push_back(span);
    gathered.insert(gathered.end(), data, data + span);
  });
  EXPECT_EQ(spans, (std::vector<std::uint64_t>{10, kPiece, 10}));
  EXPECT_TRUE(std::equal(gathered.begin(), gathered.end(), bytes.begin() + offset));
  EXPECT_EQ(reader->checksum(offset, length), checksum(bytes.data() + offset, length));
  EXPECT_THROW(reader->for_each_span(bytes.size() - 1, 2, [](const std::byte*, std::uint64_t) {}),
               StorageError);
}

// A version of host region "h" and device region "d" committed to L1 as a
// container, in chunks of `chunk` bytes; `damage` flips a byte of the
// device region's stored bytes after its checksum was taken.
class InPlaceDeviceCopyTest : public ::testing::Test {
 protected:
  void commit(int version, std::uint64_t chunk, bool damage = false) {
    format::Header header;
    header.store = "s";
    header.store_id = format::StoreId::random();
    header.version = version;
    header.chunk_size = chunk;
    header.regions.push_back({0, "h", format::RegionKind::kHost, host_.size(), "", {}});
    header.regions.push_back({1, "d", format::RegionKind::kDevice, device_.size(), "", {}});
    level_.commit(version, [&](WritableFile& file) {
      format::ContainerWriter writer(file, header);
      writer.add_chunk({0, 0, host_.size(), host_.size(), Codec::kNone, checksum(host_.data(), host_.size()), 0},
                       host_.data());
      const std::vector<std::byte> data = pattern(device_.size(), version);
      for (std::uint64_t offset = 0; offset < data.size(); offset += chunk) {
        const std::uint64_t bytes = std::min(chunk, data.size() - offset);
        std::vector<std::byte> stored(data.begin() + offset, data.begin() + offset + bytes);
        const std::uint64_t sum = checksum(stored.data(), bytes);
        if (damage && offset == chunk) stored[bytes / 2] ^= std::byte{1};
        writer.add_chunk({1, offset, bytes, bytes, Codec::kNone, sum, 0}, stored.data());
      }
      writer.finish();
    });
  }
  std::vector<Region> regions() {
    Region host;
    host.id = 0;
    host.label = "h";
    host.data = host_.data();
    host.bytes = host_.size();
    Region device = host;
    device.id = 1;
    device.label = "d";
    device.kind = MemoryKind::kDevice;
    device.data = device_.data();
    device.bytes = device_.size();
    return {host, device};
  }

  MemoryLevel level_{"s", 0, 32 * kPiece, 0};
  std::vector<std::byte> host_ = pattern(4096, 9);
  std::vector<std::byte> device_ = std::vector<std::byte>(3 * kPiece + 12345);
  std::unique_ptr<gpu::DeviceAccess> access_ = gpu::open_device_access(DeviceBackend::kHost);
};

TEST_F(InPlaceDeviceCopyTest, TheDeviceRegionsOfAVersionAreCopiedFromItsPieces) {
  commit(4, 1u << 20);
  const auto copy = InPlaceDeviceCopy::open(level_, 4, regions());
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->write_back(*access_), device_.size());
  EXPECT_EQ(device_, pattern(device_.size(), 4));
  EXPECT_EQ(host_, pattern(4096, 9)) << "host regions are the restore's";
}

TEST_F(InPlaceDeviceCopyTest, ADamagedChunkLeavesTheRegionsToTheRestore) {
  commit(4, 1u << 20, true);
  EXPECT_EQ(InPlaceDeviceCopy::open(level_, 4, regions()), nullptr);
  EXPECT_EQ(InPlaceDeviceCopy::open(level_, 5, regions()), nullptr) << "not held";
}

TEST_F(InPlaceDeviceCopyTest, ARegionSizedOtherwiseIsLeftToTheRestoresMismatchError) {
  commit(4, 1u << 20);
  std::vector<Region> wrong = regions();
  wrong[1].bytes -= 1;
  EXPECT_EQ(InPlaceDeviceCopy::open(level_, 4, wrong), nullptr);
}

#ifdef RESURGO_HAVE_CUDA_HEADERS


// 3 MiB: every version's device region straddles two of L1's 2 MiB pieces.
constexpr std::size_t kDeviceBytes = 3u << 20;

class FakeCudaPinnedMemoryLevelTest : public testing::FakeDeviceTest<kDeviceBytes> {
 protected:
  void SetUp() override {
    FakeDeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    host_to_device_ = gpu::fake_function<decltype(&fake_cuda_host_to_device_copies)>("fake_cuda_host_to_device_copies");
    ASSERT_NE(host_to_device_, nullptr) << "an older build of the fake driver";
  }
  static FakeCudaCounters counters() {
    FakeCudaCounters c{};
    control().counters(&c);
    return c;
  }

  // No L0: every version goes to L1 (kept) and L2.
  Config config(const std::string& level = "off") { return config_with({{"log.level", level}}); }
  Config config_with(const std::map<std::string, std::string>& more) {
    std::map<std::string, std::string> keys = {
        {"memory.every", "1"}, {"memory.keep", "0"}, {"memory.capacity", "64MiB"}, {"local.keep", "0"}};
    for (const auto& [key, value] : more) keys[key] = value;
    return gpu::cuda_store_config(dir_.path(), "0", keys);
  }
  static std::vector<unsigned char> device_bytes(int version) {
    return random_bytes<unsigned char>(kDeviceBytes, static_cast<unsigned>(version));
  }
  void write_versions(Store& store, int count) {
    store.protect(0, host_.data(), host_.size(), "host");
    store.protect_device(1, device_->get(), kDeviceBytes, "device");
    for (int version = 1; version <= count; ++version) {
      std::fill(host_.begin(), host_.end(), static_cast<unsigned char>(version));
      device_->upload(device_bytes(version));
      store.checkpoint(version);
    }
    store.wait();
  }
  void scramble() {
    device_->upload(std::vector<unsigned char>(kDeviceBytes, 0xee));  // a copy from pageable memory
    std::fill(host_.begin(), host_.end(), 0xee);
  }
  // Restarts `version` (after scramble()); checks the bytes and that it was
  // read from L1.
  void restart_and_check(Store& store, int version) {
    EXPECT_EQ(store.restart(version), version);
    EXPECT_EQ(store.last_restart().level, kL1) << version;
    EXPECT_EQ(device_->download(), device_bytes(version)) << version;
    EXPECT_EQ(host_, std::vector<unsigned char>(host_.size(), static_cast<unsigned char>(version))) << version;
  }

  TempDir dir_;
  decltype(&fake_cuda_host_to_device_copies) host_to_device_ = nullptr;
  std::vector<unsigned char> host_ = std::vector<unsigned char>(4096);
};

TEST_F(FakeCudaPinnedMemoryLevelTest, RetainedVersionsRestoreBitForBitFromRegisteredPieces) {
  {
    Store store("s", config());
    write_versions(store, 3);
    EXPECT_GE(counters().registered_ranges, 3u * 2) << "each version's pieces, beside the staging buffer's";
    for (int version : {3, 2, 1}) {
      scramble();
      const std::uint64_t pinned = host_to_device_(1);
      const std::uint64_t pageable = host_to_device_(0);
      const std::uint64_t synchronous = control().calls("cuMemcpyHtoD");
      restart_and_check(store, version);
      // The region straddles a piece bound: at least two copies, none over
      // two registrations (the fake refuses those).
      EXPECT_GE(host_to_device_(1), pinned + 2) << version;
      EXPECT_EQ(host_to_device_(0), pageable) << "no copy from pageable memory: " << version;
      EXPECT_EQ(control().calls("cuMemcpyHtoD"), synchronous) << "queued, not synchronous: " << version;
    }
  }
  EXPECT_EQ(counters().registered_ranges, 0u) << "unregistered with the store's levels";
}

TEST_F(FakeCudaPinnedMemoryLevelTest, AFailedRegistrationLeavesThePiecesPageableAndSaysSoOnce) {
  ASSERT_EQ(control().fail("cuMemHostRegister", 0, CUDA_ERROR_NOT_PERMITTED, -1), 0);
  ::testing::internal::CaptureStderr();
  {
    Store store("s", config("warn"));
    write_versions(store, 2);
    for (int version : {2, 1}) {
      scramble();
      const std::uint64_t pageable = host_to_device_(0);
      restart_and_check(store, version);
      EXPECT_GE(host_to_device_(0), pageable + 2) << "straight from the pageable pieces: " << version;
    }
    EXPECT_EQ(host_to_device_(1), 0u);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::string line = "the L1 memory level stays pageable";
  const std::size_t first = log.find(line);
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(line, first + 1), std::string::npos) << "logged once: " << log;
  EXPECT_NE(log.find("CUDA_ERROR_NOT_PERMITTED", first), std::string::npos) << log;
}

// The backward pass of an adjoint code: versions only on L2 brought into
// L1 by prefetch() (no L0), each restored from registered pieces.
TEST_F(FakeCudaPinnedMemoryLevelTest, PrefetchedVersionsRestoreFromRegisteredPieces) {
  Store store("s", config_with({{"memory.every", "0"}}));
  write_versions(store, 3);
  store.prefetch({3, 2, 1});
  for (int version : {3, 2, 1}) {
    scramble();
    ASSERT_TRUE(eventually([&] {
      const std::vector<VersionInfo> listed = store.versions();
      return std::any_of(listed.begin(), listed.end(), [&](const VersionInfo& info) {
        return info.version == version && !info.levels.empty() && info.levels.front() == kL1;
      });
    })) << version;
    const std::uint64_t pinned = host_to_device_(1);
    const std::uint64_t pageable = host_to_device_(0);
    restart_and_check(store, version);
    EXPECT_GE(host_to_device_(1), pinned + 2) << version;
    EXPECT_EQ(host_to_device_(0), pageable) << version;
    store.discard(version);
  }
}

// The second span's copy fails: that restart fails naming the copy (the
// first span's copy ended before the pieces could go), the next one works.
TEST_F(FakeCudaPinnedMemoryLevelTest, AFailedCopyFailsThatRestartOnly) {
  Store store("s", config());
  write_versions(store, 2);
  scramble();
  ASSERT_EQ(control().fail("cuMemcpyHtoDAsync", 1, CUDA_ERROR_LAUNCH_FAILED, 1), 0);
  try {
    store.restart(2);
    ADD_FAILURE() << "the restart succeeded";
  } catch (const std::exception& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("cuMemcpyHtoDAsync"), std::string::npos) << what;
    EXPECT_NE(what.find("CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << what;
    EXPECT_NE(what.find("version 2's device region 'device' from the L1 memory level"), std::string::npos) << what;
  }
  scramble();
  restart_and_check(store, 2);
}

TEST_F(FakeCudaPinnedMemoryLevelTest, AStoreWithoutDeviceRegionsRegistersNothing) {
  {
    Store store("s", config());
    store.protect(0, host_.data(), host_.size(), "host");
    for (int version = 1; version <= 3; ++version) store.checkpoint(version);
    store.wait();
    EXPECT_EQ(store.restart(2), 2);
  }
  EXPECT_EQ(control().calls("cuMemHostRegister"), 0u);
}

#endif  // RESURGO_HAVE_CUDA_HEADERS

}  // namespace
}  // namespace resurgo
