#include "track/mprotect_tracker.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <latch>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "track/page_set.h"
#include "track/tracker.h"
#include "track_test_util.h"
#include "error_text.h"
#include "../sanitized.h"

namespace resurgo::track {
namespace {

const std::size_t kPage = page_size();

void write_byte(std::byte* at, int value) {
  *static_cast<volatile std::byte*>(at) = static_cast<std::byte>(value);
}

// Whether a system call may write `at` now: the kernel's own writes do not
// fault, they fail with EFAULT on a write-protected page. Writes back the
// byte already there, so it neither changes nor marks anything.
bool kernel_can_write(std::byte* at) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const std::byte same = *at;
  EXPECT_EQ(::write(fds[1], &same, 1), 1);
  const ssize_t got = ::read(fds[0], at, 1);
  const int error = errno;
  ::close(fds[0]);
  ::close(fds[1]);
  if (got != 1) {
    EXPECT_EQ(error, EFAULT);
  }
  return got == 1;
}

TEST(MprotectTrackerTest, FirstCollectReportsEveryPageThenOnlyWrittenOnes) {
  PageMapping memory(8);
  auto tracker = make_mprotect_tracker();
  EXPECT_EQ(tracker->method(), Method::kMprotect);
  tracker->watch(1, memory.page(0), memory.bytes());
  EXPECT_EQ(tracker->collect(1, 1), every_page(8));

  write_byte(memory.page(1) + 10, 1);
  write_byte(memory.page(6), 2);
  write_byte(memory.page(6) + 1, 3);  // the block is writable now: no second fault
  EXPECT_EQ(tracker->collect(1, 1), pages_of(8, {1, 6}));
  EXPECT_EQ(tracker->collect(1, 1), PageSet(8));  // nothing written since
  EXPECT_EQ(memory.page(1)[10], std::byte{1});
  EXPECT_EQ(memory.page(6)[1], std::byte{3});
}

TEST(MprotectTrackerTest, UnalignedRegionReportsEveryPageItTouches) {
  PageMapping memory(5);
  std::byte* base = memory.page(0) + 100;
  const std::size_t bytes = 3 * kPage;  // ends 100 bytes into page 3
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, base, bytes);
  EXPECT_EQ(tracker->collect(1, 1), every_page(4));

  write_byte(base, 1);              // page 0
  write_byte(base + bytes - 1, 2);  // page 3
  write_byte(memory.page(4), 3);    // outside the region
  EXPECT_EQ(tracker->collect(1, 1), pages_of(4, {0, 3}));
}

TEST(MprotectTrackerTest, BlocksAreReportedWholeAndClippedToTheRegion) {
  PageMapping memory(10);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), memory.bytes());
  EXPECT_EQ(tracker->collect(1, 4), every_page(10));  // blocks {0-3} {4-7} {8-9}

  write_byte(memory.page(5), 1);
  // One fault made the whole block writable, and only it.
  EXPECT_TRUE(kernel_can_write(memory.page(4)));
  EXPECT_TRUE(kernel_can_write(memory.page(7)));
  EXPECT_FALSE(kernel_can_write(memory.page(3)));
  EXPECT_FALSE(kernel_can_write(memory.page(8)));
  write_byte(memory.page(9), 2);
  EXPECT_EQ(tracker->collect(1, 1), pages_of(10, {4, 5, 6, 7, 8, 9}));

  write_byte(memory.page(2), 3);  // blocks of one page now
  EXPECT_FALSE(kernel_can_write(memory.page(3)));
  EXPECT_EQ(tracker->collect(1, 2), pages_of(10, {2}));
}

TEST(MprotectTrackerTest, TwoRegionsOfOneTrackerAreTrackedApart) {
  PageMapping memory(6);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), 3 * kPage);
  tracker->watch(2, memory.page(3), 3 * kPage);
  EXPECT_EQ(tracker->collect(1, 1), every_page(3));
  EXPECT_EQ(tracker->collect(2, 1), every_page(3));

  write_byte(memory.page(1), 1);
  write_byte(memory.page(5), 2);
  EXPECT_EQ(tracker->collect(1, 1), pages_of(3, {1}));
  EXPECT_EQ(tracker->collect(2, 1), pages_of(3, {2}));
}

// Region A ends and region B begins on page 2 of the mapping; they belong to
// two trackers (two stores) served by the one handler.
TEST(MprotectTrackerTest, RegionsSharingAPageAreBothMarked) {
  PageMapping memory(4);
  std::byte* split = memory.page(2) + 100;
  auto tracker_a = make_mprotect_tracker();
  auto tracker_b = make_mprotect_tracker();
  tracker_a->watch(1, memory.page(0), static_cast<std::size_t>(split - memory.page(0)));
  tracker_b->watch(1, split, static_cast<std::size_t>(memory.page(4) - split));
  EXPECT_EQ(tracker_a->collect(1, 2), every_page(3));  // A's blocks: pages {0,1} {2}
  EXPECT_EQ(tracker_b->collect(1, 2), every_page(2));  // B's block: mapping pages {2,3}

  write_byte(memory.page(2) + 10, 1);             // in A's part of the shared page
  EXPECT_TRUE(kernel_can_write(memory.page(3)));  // B's whole block was unprotected
  EXPECT_FALSE(kernel_can_write(memory.page(1)));
  EXPECT_EQ(tracker_a->collect(1, 1), pages_of(3, {2}));
  EXPECT_EQ(tracker_b->collect(1, 1), pages_of(2, {0, 1}));

  write_byte(split + 10, 2);  // in B's part, blocks of one page now
  EXPECT_FALSE(kernel_can_write(memory.page(3)));
  EXPECT_EQ(tracker_a->collect(1, 1), pages_of(3, {2}));
  EXPECT_EQ(tracker_b->collect(1, 1), pages_of(2, {0}));

  // Unwatching A leaves the shared page protected for B.
  tracker_a->unwatch(1);
  EXPECT_TRUE(kernel_can_write(memory.page(1)));
  EXPECT_FALSE(kernel_can_write(memory.page(2)));
  write_byte(memory.page(2), 3);
  EXPECT_EQ(tracker_b->collect(1, 1), pages_of(2, {0}));
}

TEST(MprotectTrackerTest, FourThreadsWritingDisjointPagesAreAllReported) {
  constexpr std::size_t kPages = 64;
  constexpr std::size_t kThreads = 4;
  PageMapping memory(kPages);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), memory.bytes());
  EXPECT_EQ(tracker->collect(1, 1), every_page(kPages));

  for (std::size_t round = 0; round < 5; ++round) {
    auto written = [&](std::size_t page) { return (page * 7 + round) % 3 == 0; };
    PageSet expected(kPages);
    for (std::size_t page = 0; page < kPages; ++page) {
      if (written(page)) expected.insert(page);
    }
    std::latch start(kThreads);
    std::vector<std::thread> writers;
    for (std::size_t thread = 0; thread < kThreads; ++thread) {
      writers.emplace_back([&, thread] {
        start.arrive_and_wait();
        for (std::size_t page = thread; page < kPages; page += kThreads) {
          if (!written(page)) continue;
          for (std::size_t offset = 0; offset < kPage; offset += 512) {
            write_byte(memory.page(page) + offset, static_cast<int>(round));
          }
        }
      });
    }
    for (std::thread& writer : writers) writer.join();
    EXPECT_EQ(tracker->collect(1, 1), expected) << "round " << round;
  }
}

// Collects while threads write: a write racing with collect() may be
// reported by the next one, but none is lost and no page is invented.
TEST(MprotectTrackerTest, CollectsDuringWritesLoseNoWrite) {
  constexpr std::size_t kPages = 256;
  constexpr std::size_t kThreads = 4;
  PageMapping memory(kPages);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), memory.bytes());
  tracker->collect(1, 1);

  auto written = [](std::size_t page) { return page % 5 != 0; };
  std::atomic<std::size_t> writers_left{kThreads};
  std::vector<std::thread> writers;
  for (std::size_t thread = 0; thread < kThreads; ++thread) {
    writers.emplace_back([&, thread] {
      for (std::size_t pass = 0; pass < 50; ++pass) {
        for (std::size_t page = thread; page < kPages; page += kThreads) {
          if (written(page)) write_byte(memory.page(page) + pass, 1);
        }
      }
      writers_left.fetch_sub(1);
    });
  }
  PageSet reported(kPages);
  auto add = [&reported](const PageSet& set) {
    set.for_each_run(
        [&](std::size_t first, std::size_t count) { reported.insert_range(first, count); });
  };
  while (writers_left.load() != 0) add(tracker->collect(1, 1));
  for (std::thread& writer : writers) writer.join();
  add(tracker->collect(1, 1));

  PageSet expected(kPages);
  for (std::size_t page = 0; page < kPages; ++page) {
    if (written(page)) expected.insert(page);
  }
  EXPECT_EQ(reported, expected);
}

TEST(MprotectTrackerTest, UnwatchGivesTheMemoryBackAsItWas) {
  PageMapping memory(4);
  for (std::size_t page = 0; page < 4; ++page) write_byte(memory.page(page), 10);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), memory.bytes());
  tracker->collect(1, 2);
  write_byte(memory.page(1), 11);
  tracker->unwatch(1);

  for (std::size_t page = 0; page < 4; ++page) {
    EXPECT_TRUE(kernel_can_write(memory.page(page))) << "page " << page;
    EXPECT_EQ(memory.page(page)[0], static_cast<std::byte>(page == 1 ? 11 : 10)) << "page " << page;
  }
  EXPECT_THROW(tracker->collect(1, 1), InvalidArgumentError);
  tracker->unwatch(1);  // unknown ids are ignored
  tracker->unwatch(99);

  tracker->watch(1, memory.page(0), memory.bytes());  // the same id again
  EXPECT_EQ(tracker->collect(1, 1), every_page(4));
}

TEST(MprotectTrackerTest, SystemCallsIntoAProtectedPageFailWithEfault) {
  PageMapping memory(2);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, memory.page(0), memory.bytes());
  tracker->collect(1, 1);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const char text[] = "sixteen bytes...";
  ASSERT_EQ(::write(fds[1], text, 16), 16);
  errno = 0;
  EXPECT_EQ(::read(fds[0], memory.page(1), 16), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(tracker->collect(1, 1), PageSet(2));  // the kernel's write never faulted

  tracker->unwatch(1);
  EXPECT_EQ(::read(fds[0], memory.page(1), 16), 16);
  EXPECT_EQ(std::memcmp(memory.page(1), text, 16), 0);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(MprotectTrackerTest, RejectsBadArguments) {
  PageMapping memory(1);
  auto tracker = make_mprotect_tracker();
  EXPECT_THROW(tracker->watch(1, memory.page(0), 0), InvalidArgumentError);
  tracker->watch(1, memory.page(0), memory.bytes());
  EXPECT_THROW(tracker->watch(1, memory.page(0), memory.bytes()), InvalidArgumentError);
  for (std::size_t block_pages : {0, 3, 12}) {
    EXPECT_THROW(tracker->collect(1, block_pages), InvalidArgumentError) << block_pages;
  }
  EXPECT_THROW(tracker->collect(2, 1), InvalidArgumentError);
  EXPECT_EQ(tracker->collect(1, 1), every_page(1));  // a rejected collect takes nothing
}

// Scattered faults could split the watched pages into one mapping each: more
// than half of vm.max_map_count watched pages (less the mappings in use, none
// here; fault_safety_test.cpp counts them) would risk an mprotect failing
// inside the handler. Such a region is refused before anything is protected.
TEST(MprotectTrackerTest, PagesBeyondHalfOfMaxMapCountAreUnavailable) {
  const std::size_t max_map_count = count_mappings().limit;
  const std::size_t pages = max_map_count - max_map_count / 2 + 1;
  PageMapping memory(pages);  // never touched: only address space
  auto tracker = make_mprotect_tracker([=] { return MappingCount{max_map_count, 0}; });
  const std::string message = message_of<Unavailable>([&] { tracker->watch(6, memory.base(), memory.bytes()); });
  EXPECT_NE(message.find("region 6 ["), std::string::npos) << message;
  EXPECT_NE(message.find("vm.max_map_count (" + std::to_string(max_map_count) + ")"), std::string::npos)
      << message;
  tracker->watch(6, memory.base(), (pages - 1) * kPage);  // half the limit exactly is allowed
  tracker->unwatch(6);
  tracker->watch(7, memory.base(), (pages - 1) * kPage);  // unwatch gave the pages back
}

TEST(MprotectTrackerTest, UnmappedMemoryIsUnavailable) {
  std::byte* gone;
  {
    PageMapping memory(2);
    gone = memory.page(0);
  }
  auto tracker = make_mprotect_tracker();
  const std::string message = message_of<Unavailable>([&] { tracker->watch(5, gone, 2 * kPage); });
  EXPECT_NE(message.find("region 5 ["), std::string::npos) << message;
  std::ostringstream start;
  start << static_cast<const void*>(gone);
  EXPECT_NE(message.find("[" + start.str() + ", "), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(ENOMEM)), std::string::npos) << message;
  EXPECT_THROW(tracker->collect(5, 1), InvalidArgumentError);  // not watched
}

TEST(MprotectTrackerTest, PartOfAHugePageIsUnavailable) {
  const std::size_t huge = 2 << 20;
  void* at = ::mmap(nullptr, huge, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (at == MAP_FAILED) GTEST_SKIP() << "no huge pages here: " << std::strerror(errno);
  auto tracker = make_mprotect_tracker();
  const std::string message =
      message_of<Unavailable>([&] { tracker->watch(6, static_cast<std::byte*>(at), kPage); });
  EXPECT_NE(message.find("region 6 ["), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EINVAL)), std::string::npos) << message;
  ::munmap(at, huge);
}

// The signal that ended a child running `body`, or 0 if it exited.
int child_termination_signal(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    body();
    ::_exit(0);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

// How an unrelated segfault ends a child: by SIGSEGV, as without a tracker.
// Under a sanitizer the handler installed before the tracker's is the
// sanitizer's, which gets the fault, reports it and exits with its status
// (1 for AddressSanitizer, 66 for ThreadSanitizer).
const int kUnrelatedSegfaultEnd = kAddressSanitized ? -1 : kThreadSanitized ? -66 : SIGSEGV;

// Writes a tracked page (which must not end the child), then `fault()`.
void tracked_write_then(const std::function<void()>& fault) {
  PageMapping tracked(1);
  auto tracker = make_mprotect_tracker();
  tracker->watch(1, tracked.page(0), tracked.bytes());
  tracker->collect(1, 1);
  write_byte(tracked.page(0), 1);
  if (tracker->collect(1, 1) != pages_of(1, {0})) ::_exit(2);
  fault();
}

// A region in the heap shares its first and last pages with other heap
// allocations, which the tracker write-protects with the region. The
// tracker's own bits must not be among them: its signal handler would fault
// on them (the crash campaign's std::vector regions did). The child frees an
// 8-byte block just before watch(), so that a bitmap taken from the heap would
// reuse that block, in the watched page.
TEST(MprotectTrackerTest, TheHandlerWritesNothingInTheHeapPagesARegionShares) {
  if (kSanitized) {
    GTEST_SKIP() << "the sanitizer's allocator keeps sizes apart and quarantines freed blocks: no placement to test";
  }
  EXPECT_EQ(child_termination_signal([] {
              const auto page_of = [](const void* at) { return reinterpret_cast<std::uintptr_t>(at) / kPage; };
              auto tracker = make_mprotect_tracker();
              PageMapping warm_up(1);  // the first watch reads the system's limits, allocating as it goes
              tracker->watch(2, warm_up.page(0), kPage);
              tracker->unwatch(2);
              auto* region = static_cast<std::byte*>(std::malloc(16));
              void* freed = std::malloc(8);
              while (page_of(freed) != page_of(region)) {
                region = static_cast<std::byte*>(std::malloc(16));  // leaked: the child exits
                freed = std::malloc(8);
              }
              std::free(freed);
              auto* first = reinterpret_cast<std::byte*>(page_of(region) * kPage);
              tracker->watch(1, first, kPage);
              tracker->collect(1, 1);           // write-protects the page; the next write faults
              write_byte(region, 1);
              if (tracker->collect(1, 1).pages() != 1) ::_exit(2);
            }),
            0);
}

TEST(MprotectTrackerTest, AnUnrelatedSegfaultStillEndsTheProcess) {
  EXPECT_EQ(child_termination_signal([] {
              tracked_write_then([] {
                PageMapping read_only(1, PROT_READ);
                write_byte(read_only.page(0), 1);
              });
            }),
            kUnrelatedSegfaultEnd);
  EXPECT_EQ(child_termination_signal([] { tracked_write_then([] { write_byte(nullptr, 1); }); }),
            kUnrelatedSegfaultEnd);
  EXPECT_EQ(child_termination_signal([] { tracked_write_then([] { ::raise(SIGSEGV); }); }),
            kUnrelatedSegfaultEnd);
  // A read of a watched page the application made inaccessible itself is not
  // a write the tracker can let through.
  EXPECT_EQ(child_termination_signal([] {
              PageMapping memory(1);
              auto tracker = make_mprotect_tracker();
              tracker->watch(1, memory.page(0), memory.bytes());
              tracker->collect(1, 1);
              ::mprotect(memory.page(0), kPage, PROT_NONE);
              static_cast<void>(*static_cast<volatile std::byte*>(memory.page(0)));
            }),
            kUnrelatedSegfaultEnd);
}

std::atomic<void*> g_expected_fault_address{nullptr};

void exit_with_42_at_expected_address(int, siginfo_t* info, void*) {
  ::_exit(info->si_addr == g_expected_fault_address ? 42 : 43);
}

// A handler installed before the first tracker gets the faults that are not
// the tracker's. The death test re-executes the test binary, so the child's
// first tracker installs the handler after this one.
TEST(MprotectTrackerTest, ChainsToTheHandlerInstalledBefore) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction earlier {};
        earlier.sa_sigaction = exit_with_42_at_expected_address;
        earlier.sa_flags = SA_SIGINFO;
        sigemptyset(&earlier.sa_mask);
        ::sigaction(SIGSEGV, &earlier, nullptr);
        tracked_write_then([] {
          PageMapping read_only(1, PROT_READ);
          g_expected_fault_address = read_only.page(0);
          write_byte(read_only.page(0), 1);
        });
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace resurgo::track
