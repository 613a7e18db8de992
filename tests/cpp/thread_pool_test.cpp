// ThreadPool::parallel_for: work up to kCallerOnlyBytes runs on the
// caller's thread alone (a worker's wake-up there cost more than it saved:
// issue 27), larger work is shared with the workers, and an exception stops
// the bodies not yet started either way.
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace resurgo {
namespace {

constexpr std::size_t kUnits = 8;

// Each unit lasts a millisecond: long enough for a woken worker to take one.
std::vector<std::thread::id> threads_of_units(ThreadPool& pool, std::uint64_t bytes) {
  std::vector<std::thread::id> threads(kUnits);
  pool.parallel_for(kUnits, bytes, [&](std::size_t i) {
    threads[i] = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  return threads;
}

TEST(ThreadPoolTest, WorkUpToTheThresholdRunsEveryUnitOnTheCallersThread) {
  ThreadPool pool(2);
  for (const std::uint64_t bytes : {std::uint64_t{0}, std::uint64_t{4096}, ThreadPool::kCallerOnlyBytes}) {
    for (const std::thread::id thread : threads_of_units(pool, bytes)) {
      EXPECT_EQ(thread, std::this_thread::get_id()) << bytes << " bytes of work woke a worker";
    }
  }
}

TEST(ThreadPoolTest, APoolWithoutWorkersRunsLargeWorkOnTheCaller) {
  ThreadPool pool(0);
  for (const std::thread::id thread : threads_of_units(pool, 64 * ThreadPool::kCallerOnlyBytes)) {
    EXPECT_EQ(thread, std::this_thread::get_id());
  }
}

// Unit 0, which the caller claims first, returns only once another unit ran
// on a worker: without a helper it would wait the full 30 s and fail.
TEST(ThreadPoolTest, WorkAboveTheThresholdIsSharedWithAWorker) {
  ThreadPool pool(1);
  std::mutex mutex;
  std::condition_variable changed;
  bool on_worker = false;
  const std::thread::id caller = std::this_thread::get_id();
  pool.parallel_for(2, ThreadPool::kCallerOnlyBytes + 1, [&](std::size_t) {
    std::unique_lock lock(mutex);
    if (std::this_thread::get_id() != caller) {
      on_worker = true;
      changed.notify_all();
      return;
    }
    changed.wait_for(lock, std::chrono::seconds(30), [&] { return on_worker; });
  });
  EXPECT_TRUE(on_worker) << "no unit of work above the threshold ran on a worker";
}

TEST(ThreadPoolTest, AFailingBodyOnTheCallerStopsTheBodiesAfterIt) {
  ThreadPool pool(2);
  std::atomic<std::size_t> ran{0};
  const auto body = [&](std::size_t i) {
    ++ran;
    if (i == 2) throw std::runtime_error("unit 2 failed");
  };
  try {
    pool.parallel_for(kUnits, 1024, body);
    FAIL() << "the failure of unit 2 was not rethrown";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "unit 2 failed");
  }
  EXPECT_EQ(ran.load(), 3u) << "bodies after the failing one ran";
}

TEST(ThreadPoolTest, AFailingBodyOfSharedWorkIsRethrownToTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(kUnits, 2 * ThreadPool::kCallerOnlyBytes,
                                 [](std::size_t i) {
                                   if (i == 5) throw std::runtime_error("unit 5 failed");
                                 }),
               std::runtime_error);
}

}  // namespace
}  // namespace resurgo
