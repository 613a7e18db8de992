// The host memory device and managed regions are drained into before a
// forked checkpoint (capture/device_staging.h, ForkStaging): each half is
// pinned in pieces once mapped, a drain is cut at piece bounds (the driver
// refuses a copy over two registrations), a failed pin leaves the half
// pageable, and a forked child reads the half without a copy of it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "capture/device_staging.h"
#include "capture/snapshot.h"
#include "gpu/gpu_error.h"
#include "gpu/host_pinner.h"

namespace resurgo {
namespace {

const std::uint64_t kPage = static_cast<std::uint64_t>(::getpagesize());

using Ranges = std::vector<std::pair<std::byte*, std::uint64_t>>;

// The calls, from the application's thread and the staging's own.
struct Pins {
  std::mutex mutex;
  Ranges pinned, unpinned;
  std::size_t fail_at = SIZE_MAX;  // the pin() call that throws
  Ranges pinned_now() {
    std::lock_guard lock(mutex);
    return pinned;
  }
  Ranges unpinned_now() {
    std::lock_guard lock(mutex);
    return unpinned;
  }
};

// Pins nothing: records the calls, in pieces of three pages.
class CountingPinner : public gpu::HostPinner {
 public:
  explicit CountingPinner(std::shared_ptr<Pins> pins) : pins_(std::move(pins)) {}
  std::string name() const override { return "counting"; }
  std::size_t max_piece() const override { return 3 * kPage; }
  void pin(void* data, std::size_t bytes) override {
    std::lock_guard lock(pins_->mutex);
    if (pins_->pinned.size() == pins_->fail_at) throw gpu::GpuError("injected pin failure", 2);
    pins_->pinned.emplace_back(static_cast<std::byte*>(data), bytes);
  }
  void unpin(void* data, std::size_t bytes) noexcept override {
    std::lock_guard lock(pins_->mutex);
    pins_->unpinned.emplace_back(static_cast<std::byte*>(data), bytes);
  }

 private:
  std::shared_ptr<Pins> pins_;
};

class ForkStagingTest : public ::testing::Test {
 protected:
  std::shared_ptr<Pins> pins_ = std::make_shared<Pins>();
  Logger log_{"fork-staging", LogLevel::kOff};
  std::unique_ptr<ForkStaging> open() { return std::make_unique<ForkStaging>(std::make_unique<CountingPinner>(pins_), log_); }
};

Ranges pieces_of(std::byte* data) {
  return {{data, 3 * kPage}, {data + 3 * kPage, 3 * kPage}, {data + 6 * kPage, 3 * kPage}, {data + 9 * kPage, kPage}};
}

// The first acquire maps and pins its half; the other is prepared by the
// staging's thread meanwhile (the second acquire waits for it, counted as
// first touch); later acquires pin nothing.
TEST_F(ForkStagingTest, EachHalfIsPinnedInPiecesOnceTheOtherInTheBackground) {
  auto staging = open();
  CaptureTimes times;
  const ForkStaging::Half half = staging->acquire(10 * kPage, times);
  EXPECT_GT(times.first_touch_seconds, 0);
  const ForkStaging::Half other = staging->acquire(10 * kPage, times);
  EXPECT_NE(other.data, half.data);
  EXPECT_EQ(times.backpressure_seconds, 0);
  Ranges expected = pieces_of(half.data);
  const Ranges others = pieces_of(other.data);
  expected.insert(expected.end(), others.begin(), others.end());
  EXPECT_EQ(pins_->pinned_now(), expected);
  staging->release(half.index);
  staging->release(other.index);
  const ForkStaging::Half again = staging->acquire(10 * kPage, times);
  EXPECT_EQ(again.data, half.data);
  EXPECT_EQ(pins_->pinned_now().size(), 8u);
  staging->release(again.index);
  staging.reset();
  EXPECT_EQ(pins_->unpinned_now().size(), 8u);
}

TEST_F(ForkStagingTest, ACopyNeverSpansTwoPieces) {
  auto staging = open();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> copies;
  gpu::for_each_pin_piece(0, 7 * kPage + 5, staging->piece(), [&](std::uint64_t offset, std::uint64_t length) {
    copies.emplace_back(offset, length);
  });
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> expected = {
      {0, 3 * kPage}, {3 * kPage, 3 * kPage}, {6 * kPage, kPage + 5}};
  EXPECT_EQ(copies, expected);
}

TEST_F(ForkStagingTest, AFailedPinLeavesTheHalfPageableAndUnpinsOnlyWhatWasPinned) {
  pins_->fail_at = 1;  // the first half's second piece; the other half's pins then fail at once
  auto staging = open();
  CaptureTimes times;
  const ForkStaging::Half half = staging->acquire(10 * kPage, times);
  half.data[10 * kPage - 1] = std::byte{7};  // mapped whole all the same
  const ForkStaging::Half other = staging->acquire(10 * kPage, times);
  other.data[10 * kPage - 1] = std::byte{7};
  staging->release(half.index);
  staging->release(other.index);
  staging.reset();
  const Ranges expected = {{half.data, 3 * kPage}};
  EXPECT_EQ(pins_->unpinned_now(), expected);
}

// Shared memory: the child reads the parent's pages and a write of the
// child's shows in the parent (a private copy would not).
TEST_F(ForkStagingTest, AForkedChildSharesTheHalfGivenToIt) {
  auto staging = open();
  CaptureTimes times;
  const ForkStaging::Half given = staging->acquire(2 * kPage, times);
  const ForkStaging::Half kept = staging->acquire(2 * kPage, times);
  given.data[0] = std::byte{42};
  pid_t child = 0;
  {
    const ForkStaging::Sharing sharing(*staging, given.index);
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const bool read = given.data[0] == std::byte{42};
      given.data[1] = std::byte{43};
      ::_exit(read ? 0 : 1);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child could not read the half given to it";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(given.data[1], std::byte{43});
  staging->release(given.index);
  staging->release(kept.index);
}

}  // namespace
}  // namespace resurgo
