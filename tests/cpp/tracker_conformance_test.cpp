// What every tracking method must do alike, through open_tracker() as a
// store will use it: exact page sets for the same writes, whatever the
// method. Method-specific behaviour (kernel interfaces, signal chaining,
// process-wide soft-dirty bits, hash collisions) is in each method's test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "test_util.h"
#include "track_test_util.h"
#include "track/tracker_choice.h"

namespace resurgo::track {
namespace {

// Changes the byte: hash sees only writes that change content.
void touch(std::byte* at) { *at = static_cast<std::byte>(static_cast<unsigned char>(*at) + 1); }

// A method this kernel lacks (soft-dirty needs CONFIG_MEM_SOFT_DIRTY, uffd
// Linux 6.7) is skipped with the reason open_tracker gives.
// The method a configuration names `name` ("uffd", "hash", ...).
TrackMethod method_named(const std::string& name) {
  Config config;
  config.set("track.method", name);
  return config.track.method;
}

class TrackerConformance : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    try {
      tracker_ = open_tracker(method_named(GetParam()), log_);
    } catch (const ConfigError& unavailable) {
      GTEST_SKIP() << unavailable.what();
    }
  }
  Logger log_{"tracker-test", LogLevel::kOff};
  std::unique_ptr<Tracker> tracker_;
};

TEST_P(TrackerConformance, IsTheMethodAsked) {
  EXPECT_STREQ(to_string(tracker_->method()), GetParam());
}

TEST_P(TrackerConformance, FirstCollectReportsEveryPageThenOnlyWhatWasWritten) {
  PageMapping memory(64);
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.base(), memory.bytes());
  PageSet all(64);
  all.insert_range(0, 64);
  EXPECT_EQ(tracker->collect(1, 1), all);
  EXPECT_EQ(tracker->collect(1, 1), PageSet(64)) << "nothing written since the previous collect";
  for (std::size_t page : {3u, 4u, 17u, 63u}) touch(memory.page(page) + 100);
  EXPECT_EQ(tracker->collect(1, 1), pages_of(64, {3, 4, 17, 63}));
  touch(memory.page(0));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(64, {0})) << "collect re-arms tracking";
}

TEST_P(TrackerConformance, RegionOffPageBoundariesCountsThePagesItTouches) {
  PageMapping memory(10);
  std::byte* base = memory.page(1) + 100;         // starts inside page 1 of the mapping
  const std::size_t bytes = 4 * page_size();       // ends inside page 5: 5 pages touched
  Tracker* tracker = tracker_.get();
  tracker->watch(7, base, bytes);
  ASSERT_EQ(tracker->collect(7, 1).pages(), 5u);
  touch(base);              // region page 0
  touch(base + bytes - 1);  // region page 4
  EXPECT_EQ(tracker->collect(7, 1), pages_of(5, {0, 4}));
}

TEST_P(TrackerConformance, RegionsAreTrackedApart) {
  PageMapping memory(32);
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.page(0), 16 * page_size());
  tracker->watch(2, memory.page(16), 16 * page_size());
  tracker->collect(1, 1);
  tracker->collect(2, 1);
  touch(memory.page(2));
  touch(memory.page(20));
  touch(memory.page(21));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(16, {2}));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(16, {4, 5}));
}

TEST_P(TrackerConformance, WritesFromOtherThreadsAreSeen) {
  PageMapping memory(256);
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.base(), memory.bytes());
  tracker->collect(1, 1);
  std::vector<std::thread> writers;
  std::vector<std::size_t> expected;
  for (std::size_t thread = 0; thread < 4; ++thread) {
    for (std::size_t page = thread; page < 256; page += 9) expected.push_back(page);
    writers.emplace_back([&memory, thread] {
      for (std::size_t page = thread; page < 256; page += 9) touch(memory.page(page) + thread);
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(tracker->collect(1, 1), pages_of(256, expected));
}

// With blocks of k pages a method reports at least the written pages and at
// most the whole blocks that hold them.
TEST_P(TrackerConformance, BlocksBoundWhatIsReported) {
  PageMapping memory(64);
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.base(), memory.bytes());
  tracker->collect(1, 4);
  touch(memory.page(5));
  touch(memory.page(40));
  const PageSet reported = tracker->collect(1, 4);
  for (std::size_t page = 0; page < 64; ++page) {
    const bool written = page == 5 || page == 40;
    const bool in_written_block = page / 4 == 1 || page / 4 == 10;
    if (written) {
      EXPECT_TRUE(reported.contains(page)) << "page " << page;
    }
    if (!in_written_block) {
      EXPECT_FALSE(reported.contains(page)) << "page " << page;
    }
  }
  EXPECT_THROW(tracker->collect(1, 3), InvalidArgumentError) << "blocks are a power of two of pages";
}

TEST_P(TrackerConformance, UnwatchGivesTheMemoryBackAsItWas) {
  PageMapping memory(8);
  std::memset(memory.base(), 0x5a, memory.bytes());
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.base(), memory.bytes());
  tracker->collect(1, 1);
  tracker->unwatch(1);
  tracker->unwatch(1);  // unknown ids are ignored
  std::vector<std::byte> expected(memory.bytes(), std::byte{0x5a});
  EXPECT_EQ(std::memcmp(memory.base(), expected.data(), expected.size()), 0);
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  ASSERT_EQ(::write(pipe_ends[1], "xy", 2), 2);
  EXPECT_EQ(::read(pipe_ends[0], memory.page(3), 2), 2) << "the kernel may write into it again";
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
  EXPECT_THROW(tracker->collect(1, 1), InvalidArgumentError);
}

// Shared file-backed memory: whichever method watches it (the one asked, or
// hash when that one cannot), the pages are exact.
TEST_P(TrackerConformance, FileBackedMemoryIsTracked) {
  TempDir dir;
  const std::string path = dir.path() + "/mapped";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(16 * page_size())), 0);
  {
    PageMapping memory(16, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
    Tracker* tracker = tracker_.get();
    tracker->watch(1, memory.base(), memory.bytes());
    tracker->collect(1, 1);
    touch(memory.page(9));
    EXPECT_EQ(tracker->collect(1, 1), pages_of(16, {9}));
    tracker->unwatch(1);
  }
  ::close(fd);
}

TEST_P(TrackerConformance, WatchingAnIdTwiceIsRefused) {
  PageMapping memory(4);
  Tracker* tracker = tracker_.get();
  tracker->watch(1, memory.base(), memory.bytes());
  EXPECT_THROW(tracker->watch(1, memory.base(), memory.bytes()), InvalidArgumentError);
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, TrackerConformance, ::testing::Values("uffd", "soft-dirty", "mprotect", "hash"),
                         [](const ::testing::TestParamInfo<const char*>& method) {
                           std::string name = method.param;
                           return name == "soft-dirty" ? std::string("soft_dirty") : name;
                         });

// Auto takes uffd where the kernel has it, else hash (tracker_choice.h says
// why never soft-dirty or mprotect).
TEST(TrackerChoice, AutoTakesUffdWhereAvailableElseHash) {
  Logger log("tracker-test", LogLevel::kOff);
  bool uffd_available = true;
  try {
    open_tracker(TrackMethod::kUffd, log);
  } catch (const ConfigError&) {
    uffd_available = false;
  }
  EXPECT_EQ(open_tracker(TrackMethod::kAuto, log)->method(), uffd_available ? Method::kUffd : Method::kHash);
}

TEST(TrackerChoice, UnknownMethodIsAConfigErrorListingTheMethods) {
  try {
    method_named("dirty-bits");
    FAIL() << "no error";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("use auto, uffd, soft-dirty, mprotect or hash"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace resurgo::track
