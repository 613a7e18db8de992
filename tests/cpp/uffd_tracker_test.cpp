// The uffd tracker (userfaultfd asynchronous write protection + PAGEMAP_SCAN):
// exact page sets for writes from this thread, other threads, the kernel and
// a forked child; regions off page boundaries and sharing pages; unwatch.
// Every test is skipped, with the reason, where the kernel lacks the method.
#include "track_test_util.h"
#include "track/uffd_tracker.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <numeric>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace resurgo::track {

// gtest shows a PageSet as its runs of written pages ("8 pages: 2-3 6").
static void PrintTo(const PageSet& set, std::ostream* out) {
  *out << set.pages() << " pages:";
  set.for_each_run([&](std::size_t first, std::size_t count) {
    *out << ' ' << first;
    if (count > 1) *out << '-' << first + count - 1;
  });
}

}  // namespace resurgo::track

namespace {

using resurgo::InvalidArgumentError;
using resurgo::track::make_uffd_tracker;
using resurgo::track::Method;
using resurgo::track::page_size;
using resurgo::track::PageMapping;
using resurgo::track::PageSet;
using resurgo::track::every_page;
using resurgo::track::pages_of;
using resurgo::track::Tracker;
using resurgo::track::Unavailable;

void write_byte(std::byte* at) { *reinterpret_cast<volatile std::byte*>(at) = std::byte{0x5a}; }

std::byte read_byte(const std::byte* at) { return *reinterpret_cast<const volatile std::byte*>(at); }

// The VmFlags line of the mapping holding `address`, from /proc/self/smaps.
std::string vm_flags_at(const void* address) {
  const auto wanted = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0;
    unsigned long end = 0;
    char dash = 0;
    if (std::sscanf(line.c_str(), "%lx%c%lx ", &begin, &dash, &end) == 3 && dash == '-') {
      inside = begin <= wanted && wanted < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Bit 57 of /proc/self/pagemap: the page table entry is uffd write-protected.
bool uffd_write_protected(const void* address) {
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0) throw std::runtime_error("open /proc/self/pagemap: " + std::string(std::strerror(errno)));
  std::uint64_t entry = 0;
  const auto offset = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(address) / page_size() * sizeof entry);
  const ssize_t read = ::pread(pagemap, &entry, sizeof entry, offset);
  ::close(pagemap);
  if (read != static_cast<ssize_t>(sizeof entry)) throw std::runtime_error("short read of /proc/self/pagemap");
  return (entry >> 57) & 1;
}

class UffdTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      tracker = make_uffd_tracker();
    } catch (const Unavailable& unavailable) {
      GTEST_SKIP() << unavailable.what();
    }
  }

  // Watches the region and takes its first collect (every page), so that
  // the next collect reports only what the test writes.
  void watch_and_start(int id, std::byte* base, std::size_t bytes) {
    tracker->watch(id, base, bytes);
    ASSERT_EQ(tracker->collect(id, 1), every_page(resurgo::track::pages_spanned(base, bytes)));
  }

  std::unique_ptr<Tracker> tracker;
};

TEST_F(UffdTrackerTest, FirstCollectReportsEveryPageThenNothingWithoutWrites) {
  PageMapping memory(8);
  memory.fill(std::byte{1});
  EXPECT_EQ(tracker->method(), Method::kUffd);
  tracker->watch(1, memory.base(), memory.bytes());
  EXPECT_EQ(tracker->collect(1, 1), every_page(8));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(8));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(8));
}

TEST_F(UffdTrackerTest, ReportsExactlyTheWrittenPagesNotTheReadOnes) {
  PageMapping memory(16);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  for (std::size_t page = 0; page < 16; ++page) EXPECT_EQ(read_byte(memory.page(page)), std::byte{1});
  write_byte(memory.page(1));
  write_byte(memory.page(5) + 100);
  write_byte(memory.page(6) + page_size() - 1);
  write_byte(memory.page(15));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(16, {1, 5, 6, 15}));
  write_byte(memory.page(5));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(16, {5}));
}

TEST_F(UffdTrackerTest, PagesNeverPopulatedAreTrackedFromTheirFirstWrite) {
  PageMapping memory(16);  // never touched before watch: no page table entries yet
  watch_and_start(1, memory.base(), memory.bytes());
  EXPECT_EQ(read_byte(memory.page(2)), std::byte{0});
  EXPECT_EQ(read_byte(memory.page(3)), std::byte{0});
  write_byte(memory.page(3));
  write_byte(memory.page(9));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(16, {3, 9}));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(16));
}

TEST_F(UffdTrackerTest, RegionOffPageBoundariesCountsEveryPageItTouches) {
  PageMapping memory(8);
  memory.fill(std::byte{1});
  std::byte* base = memory.page(1) + 100;
  const std::size_t bytes = 3 * page_size();  // ends 100 bytes into page 4: 4 pages
  ASSERT_EQ(resurgo::track::pages_spanned(base, bytes), 4u);
  watch_and_start(1, base, bytes);
  write_byte(base);
  write_byte(base + bytes - 1);
  write_byte(memory.page(0));  // outside the region, on a page it does not touch
  write_byte(memory.page(6));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(4, {0, 3}));
  write_byte(memory.page(2) + 5);
  EXPECT_EQ(tracker->collect(1, 1), pages_of(4, {1}));
}

TEST_F(UffdTrackerTest, TwoRegionsSharingAPageBothSeeItsWrites) {
  PageMapping memory(4);
  memory.fill(std::byte{1});
  std::byte* shared = memory.page(1);
  const std::size_t half = page_size() / 2;
  // a: pages 0-1 (ends mid page 1); b: pages 1-3 (starts mid page 1).
  watch_and_start(1, memory.base(), page_size() + half);
  watch_and_start(2, shared + half, 2 * page_size() + half);
  write_byte(shared);  // a's half of the shared page
  EXPECT_EQ(tracker->collect(1, 1), pages_of(2, {1}));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(3, {0}));
  write_byte(shared + half);  // b's half, collected in the other order
  write_byte(memory.page(3));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(3, {0, 2}));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(2, {1}));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(2));
  EXPECT_EQ(tracker->collect(2, 1), PageSet(3));
}

TEST_F(UffdTrackerTest, WatchingANeighbourKeepsTheWriteTheOtherHasNotCollected) {
  PageMapping memory(4);
  memory.fill(std::byte{1});
  const std::size_t half = page_size() / 2;
  watch_and_start(1, memory.base(), page_size() + half);
  write_byte(memory.page(1));
  tracker->watch(2, memory.page(1) + half, page_size());
  EXPECT_EQ(tracker->collect(2, 1), every_page(2));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(2, {1}));
  EXPECT_EQ(tracker->collect(2, 1), PageSet(2));
}

TEST_F(UffdTrackerTest, UnwatchKeepsTheSharedPageTrackedForTheNeighbour) {
  PageMapping memory(4);
  memory.fill(std::byte{1});
  const std::size_t half = page_size() / 2;
  watch_and_start(1, memory.base(), page_size() + half);
  watch_and_start(2, memory.page(1) + half, 2 * page_size());
  tracker->unwatch(1);
  EXPECT_EQ(vm_flags_at(memory.page(0)).find(" uw"), std::string::npos);
  EXPECT_NE(vm_flags_at(memory.page(1)).find(" uw"), std::string::npos);
  write_byte(memory.page(0));
  write_byte(memory.page(1));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(3, {0}));
}

TEST_F(UffdTrackerTest, WritesFromAnotherThread) {
  PageMapping memory(64);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  std::thread writer([&] {
    for (std::size_t page = 0; page < 64; page += 3) write_byte(memory.page(page) + 7);
  });
  writer.join();
  PageSet expected(64);
  for (std::size_t page = 0; page < 64; page += 3) expected.insert(page);
  EXPECT_EQ(tracker->collect(1, 1), expected);
}

TEST_F(UffdTrackerTest, WritesRacingWithCollectAreReportedAndOnlyThem) {
  PageMapping memory(256);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    do {
      for (std::size_t page = 1; page < 256; page += 2) write_byte(memory.page(page));
    } while (!stop.load(std::memory_order_relaxed));
  });
  PageSet seen(256);
  for (int round = 0; round < 200; ++round) {
    tracker->collect(1, 1).for_each_run([&](std::size_t first, std::size_t count) { seen.insert_range(first, count); });
  }
  stop = true;
  writer.join();
  tracker->collect(1, 1).for_each_run([&](std::size_t first, std::size_t count) { seen.insert_range(first, count); });
  PageSet expected(256);
  for (std::size_t page = 1; page < 256; page += 2) expected.insert(page);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(tracker->collect(1, 1), PageSet(256));
}

TEST_F(UffdTrackerTest, WritesByTheKernelIntoTheRegionAreReported) {
  PageMapping memory(8);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  const char message[] = "from the kernel";
  ASSERT_EQ(::write(pipe_ends[1], message, sizeof message), static_cast<ssize_t>(sizeof message));
  ASSERT_EQ(::read(pipe_ends[0], memory.page(4) + 10, sizeof message), static_cast<ssize_t>(sizeof message));
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);
  EXPECT_EQ(tracker->collect(1, 1), pages_of(8, {4}));
}

TEST_F(UffdTrackerTest, BlockPagesAboveOneStillReportsPages) {
  PageMapping memory(32);
  memory.fill(std::byte{1});
  tracker->watch(1, memory.base(), memory.bytes());
  EXPECT_EQ(tracker->collect(1, 8), every_page(32));
  write_byte(memory.page(9));
  write_byte(memory.page(31));
  EXPECT_EQ(tracker->collect(1, 16), pages_of(32, {9, 31}));
}

TEST_F(UffdTrackerTest, BlockPagesNotAPowerOfTwoIsRejected) {
  PageMapping memory(4);
  tracker->watch(1, memory.base(), memory.bytes());
  EXPECT_THROW(tracker->collect(1, 0), InvalidArgumentError);
  EXPECT_THROW(tracker->collect(1, 3), InvalidArgumentError);
  EXPECT_THROW(tracker->collect(1, 12), InvalidArgumentError);
  EXPECT_EQ(tracker->collect(1, 4), every_page(4));  // the rejected calls collected nothing
}

TEST_F(UffdTrackerTest, IdsAndArgumentsAreChecked) {
  PageMapping memory(4);
  tracker->watch(1, memory.base(), page_size());
  EXPECT_THROW(tracker->watch(1, memory.page(2), page_size()), InvalidArgumentError);
  EXPECT_THROW(tracker->watch(2, memory.base(), 0), InvalidArgumentError);
  EXPECT_THROW(tracker->collect(3, 1), InvalidArgumentError);
  EXPECT_NO_THROW(tracker->unwatch(3));
}

TEST_F(UffdTrackerTest, MemoryNotAllMappedIsRejected) {
  PageMapping memory(3);
  ASSERT_EQ(::munmap(memory.page(1), page_size()), 0);
  EXPECT_THROW(tracker->watch(1, memory.base(), memory.bytes()), InvalidArgumentError);
  ASSERT_EQ(::mmap(memory.page(1), page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            static_cast<void*>(memory.page(1)));
}

TEST_F(UffdTrackerTest, UnwatchGivesTheMemoryBackAsItWas) {
  PageMapping memory(8);
  for (std::size_t page = 0; page < 8; ++page) std::memset(memory.page(page), static_cast<int>(page), page_size());
  EXPECT_EQ(vm_flags_at(memory.base()).find(" uw"), std::string::npos);
  watch_and_start(1, memory.base(), memory.bytes());
  EXPECT_NE(vm_flags_at(memory.base()).find(" uw"), std::string::npos);
  EXPECT_TRUE(uffd_write_protected(memory.page(3)));
  write_byte(memory.page(2));
  tracker->unwatch(1);
  EXPECT_EQ(vm_flags_at(memory.base()).find(" uw"), std::string::npos);
  for (std::size_t page = 0; page < 8; ++page) {
    EXPECT_FALSE(uffd_write_protected(memory.page(page))) << "page " << page;
    EXPECT_EQ(read_byte(memory.page(page) + 1), static_cast<std::byte>(page)) << "page " << page;
  }
  EXPECT_EQ(read_byte(memory.page(2)), std::byte{0x5a});
  write_byte(memory.page(7));
  EXPECT_EQ(read_byte(memory.page(7)), std::byte{0x5a});
  tracker->watch(1, memory.base(), memory.bytes());  // the id is free again
  EXPECT_EQ(tracker->collect(1, 1), every_page(8));
}

// The application may free tracked memory before it unwatches it, and then
// map new memory at the same address.
TEST_F(UffdTrackerTest, UnwatchAfterTheMemoryWasUnmappedFreesItsAddresses) {
  PageMapping memory(4);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  ASSERT_EQ(::munmap(memory.base(), memory.bytes()), 0);
  EXPECT_EQ(tracker->collect(1, 1), PageSet(4));
  EXPECT_NO_THROW(tracker->unwatch(1));
  ASSERT_EQ(::mmap(memory.base(), memory.bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            static_cast<void*>(memory.base()));
  memory.fill(std::byte{2});
  watch_and_start(2, memory.base(), memory.bytes());
  write_byte(memory.page(3));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(4, {3}));
}

TEST_F(UffdTrackerTest, CollectOfMemoryMappedAgainWithoutUnwatchThrows) {
  PageMapping memory(4);
  watch_and_start(1, memory.base(), memory.bytes());
  ASSERT_EQ(::mmap(memory.base(), memory.bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            static_cast<void*>(memory.base()));
  EXPECT_THROW(tracker->collect(1, 1), resurgo::StateError);
}

TEST_F(UffdTrackerTest, SharedMappingsAreUnavailableNamingTheRegion) {
  PageMapping anonymous_shared(4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS);
  const int file = ::memfd_create("uffd_tracker_test", MFD_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::ftruncate(file, static_cast<off_t>(4 * page_size())), 0);
  PageMapping file_shared(4, PROT_READ | PROT_WRITE, MAP_SHARED, file);
  ::close(file);
  for (const PageMapping* memory : {&anonymous_shared, &file_shared}) {
    try {
      tracker->watch(7, memory->base(), memory->bytes());
      ADD_FAILURE() << "watch of a shared mapping did not throw";
    } catch (const Unavailable& unavailable) {
      const std::string message = unavailable.what();
      EXPECT_NE(message.find("region 7"), std::string::npos) << message;
      EXPECT_NE(message.find("shared mapping"), std::string::npos) << message;
      EXPECT_NE(message.find("track.method = hash"), std::string::npos) << message;
    }
    EXPECT_EQ(vm_flags_at(memory->base()).find(" uw"), std::string::npos);
  }
  EXPECT_THROW(tracker->collect(7, 1), InvalidArgumentError);
}

TEST_F(UffdTrackerTest, HugetlbMemoryIsUnavailable) {
  const std::size_t huge = 2 * 1024 * 1024;
  void* memory = ::mmap(nullptr, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (memory == MAP_FAILED) GTEST_SKIP() << "no hugetlb pages here: " << std::strerror(errno);
  EXPECT_THROW(tracker->watch(1, static_cast<std::byte*>(memory), huge), Unavailable);
  ::munmap(memory, huge);
}

// Where the kernel backs the memory with transparent huge pages (madvise
// mode asks for them), a write still reports its page only.
TEST_F(UffdTrackerTest, TransparentHugePagesReportOnlyTheWrittenPages) {
  const std::size_t huge_pages = 2 * 1024 * 1024 / page_size();
  PageMapping memory(3 * huge_pages);
  const std::uintptr_t huge_bytes = huge_pages * page_size();
  auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(memory.base()) + huge_bytes - 1) /
                                               huge_bytes * huge_bytes);
  ::madvise(aligned, 2 * huge_bytes, MADV_HUGEPAGE);
  std::memset(aligned, 1, 2 * huge_bytes);
  watch_and_start(1, aligned, 2 * huge_bytes);
  write_byte(aligned + 7 * page_size());
  write_byte(aligned + (huge_pages + 300) * page_size());
  EXPECT_EQ(tracker->collect(1, 1), pages_of(2 * huge_pages, {7, huge_pages + 300}));
  write_byte(aligned + 8 * page_size());
  EXPECT_EQ(tracker->collect(1, 1), pages_of(2 * huge_pages, {8}));
}

TEST_F(UffdTrackerTest, MemoryAnotherTrackerWatchesIsUnavailable) {
  PageMapping memory(4);
  tracker->watch(1, memory.base(), memory.bytes());
  const std::unique_ptr<Tracker> other = make_uffd_tracker();
  EXPECT_THROW(other->watch(1, memory.page(1), page_size()), Unavailable);
  tracker->unwatch(1);
  other->watch(1, memory.page(1), page_size());
  EXPECT_EQ(other->collect(1, 1), every_page(1));
}

TEST_F(UffdTrackerTest, ParentKeepsTrackingAcrossAForkWhoseChildWrites) {
  PageMapping memory(8);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::memset(memory.base(), 0x77, memory.bytes());
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(tracker->collect(1, 1), PageSet(8));
  for (std::size_t page = 0; page < 8; ++page) EXPECT_EQ(read_byte(memory.page(page)), std::byte{1});
  write_byte(memory.page(2));
  write_byte(memory.page(5));
  EXPECT_EQ(tracker->collect(1, 1), pages_of(8, {2, 5}));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(8));
}

// Many separate runs of written pages: the PAGEMAP_SCAN output buffer fills
// several times per collect, and the second round shows the first re-armed.
TEST_F(UffdTrackerTest, TenThousandPagesInPseudoRandomOrderThenADifferentSubset) {
  const std::size_t pages = 16384;
  PageMapping memory(pages);
  memory.fill(std::byte{1});
  watch_and_start(1, memory.base(), memory.bytes());
  std::vector<std::size_t> order(pages);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 random(20260508);
  for (std::size_t written : {std::size_t{10000}, std::size_t{3000}}) {
    std::shuffle(order.begin(), order.end(), random);
    PageSet expected(pages);
    for (std::size_t i = 0; i < written; ++i) {
      write_byte(memory.page(order[i]) + order[i] % page_size());
      expected.insert(order[i]);
    }
    ASSERT_EQ(expected.count(), written);
    EXPECT_EQ(tracker->collect(1, 1), expected) << written << " pages written";
  }
  EXPECT_EQ(tracker->collect(1, 1), PageSet(pages));
}

}  // namespace
