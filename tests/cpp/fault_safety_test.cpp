// The faults of issue 26, part 5: what a failed restart leaves in the
// protected memory, a store inherited by a forked child, a flood of
// termination signals, the mprotect tracker under a replaced SIGSEGV handler
// or a short budget of mappings, the eager pin's wait for a token another
// holds, and a protect that fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "auto/termination_flush.h"
#include "base/log.h"
#include "format/container.h"
#include "gpu/registration_token.h"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "../sanitized.h"
#include "test_util.h"
#include "track/mprotect_tracker.h"
#include "track/tracker_choice.h"
#include "track_test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// How a child process running `body` ended: its exit status, or minus the
// signal that killed it; kHung when it ran past `limit` (it is then killed
// with every process it forked). `body` ends the child itself, or returns
// for an exit status of 0; an exception out of it is status 99.
constexpr int kHung = 1000;

int run_child(const std::function<void()>& body, seconds limit = seconds(30)) {
  int done[2];
  if (::pipe(done) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    ::close(done[0]);
    try {
      body();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child: %s\n", error.what());
      ::_exit(99);
    }
    ::_exit(0);
  }
  ::setpgid(child, child);  // whichever of the two runs first
  ::close(done[1]);
  // The read end sees end-of-file once every process holding the write end
  // (the child and whatever it forked) is gone.
  pollfd ready{done[0], POLLIN, 0};
  int events = 0;
  while ((events = ::poll(&ready, 1, static_cast<int>(limit.count() * 1000))) < 0 && errno == EINTR) {
  }
  ::close(done[0]);
  if (events == 0) ::kill(-child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (events == 0) return kHung;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// Ends a child with `code` unless `condition` holds, saying why on stderr.
void child_check(bool condition, int code, const std::string& what) {
  if (condition) return;
  std::fprintf(stderr, "child check %d failed: %s\n", code, what.c_str());
  ::_exit(code);
}

Config store_config(const TempDir& dir, std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> keys = {
      {"local.path", dir.path() + "/l2"}, {"persistent.every", "0"}, {"log.level", "off"}};
  for (auto& [key, value] : extra) keys[key] = value;
  return Config::load("", keys);
}

std::string container_path(const TempDir& dir, const std::string& store, int version) {
  char name[64];
  std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, 0);
  return dir.path() + "/l2/" + store + "/" + name;
}

// -------------------------------------------------------------- restart

class FaultSafetyRestart : public ::testing::Test {
 protected:
  // Four chunks of 64 KiB each: small, since the sanitizer runs of make test
  // check every byte of them.
  static constexpr std::size_t kBytes = 256 << 10;

  // Writes version 1 of store "s" holding the regions `labels`, then fills
  // them with kSentinel, as an application about to restart would hold them.
  void write_version(const Config& config, const std::vector<std::string>& labels) {
    for (std::size_t r = 0; r < labels.size(); ++r) {
      regions_.emplace_back(kBytes, static_cast<std::byte>(r + 1));
    }
    Store store("s", config);
    protect(store, labels);
    store.checkpoint(1);
    store.wait(1, kL2);
    for (auto& region : regions_) std::fill(region.begin(), region.end(), kSentinel);
  }

  void protect(Store& store, const std::vector<std::string>& labels) {
    for (std::size_t r = 0; r < labels.size(); ++r) {
      store.protect(static_cast<int>(r), regions_[r].data(), kBytes, labels[r]);
    }
  }

  // Flips a byte in the stored bytes of the `nth` chunk of region `region`.
  void damage_chunk(const std::string& path, std::uint32_t region, std::size_t nth) {
    const format::Container container = format::read_container(*Env::posix()->open(path));
    std::size_t seen = 0;
    for (const format::ChunkRecord& chunk : container.chunks) {
      if (chunk.region == region && seen++ == nth) return flip_bit(path, chunk.file_offset + chunk.stored_length / 2);
    }
    FAIL() << "no chunk " << nth << " of region " << region << " in " << path;
  }

  std::string restart_error(Store& store) {
    try {
      store.restart(1);
    } catch (const CorruptionError& error) {
      return error.what();
    }
    ADD_FAILURE() << "restart(1) did not fail";
    return "";
  }

  // Whether a restart's error calls region `label` unchanged.
  static bool called_unchanged(const std::string& message, const std::string& label) {
    if (message.find("the protected regions are unchanged") != std::string::npos) return true;
    const std::size_t begin = message.find("before the failure; ");
    if (begin == std::string::npos) return false;
    const std::size_t end = message.find(" unchanged", begin);
    return message.substr(begin, end - begin).find("'" + label + "'") != std::string::npos;
  }

  bool untouched(std::size_t region) const {
    return std::all_of(regions_[region].begin(), regions_[region].end(), [](std::byte b) { return b == kSentinel; });
  }

  static constexpr std::byte kSentinel{0xee};
  TempDir dir_;
  std::vector<std::vector<std::byte>> regions_;
};

// One pipeline thread reads the chunks in order: 'u' and 'v' are written,
// then the damaged first chunk of 'w' (read straight into 'w') stops the
// restart before it reaches 'x'.
TEST_F(FaultSafetyRestart, TheErrorNamesTheRegionsWrittenAndTheUnchangedOnes) {
  const Config config = store_config(dir_, {{"pipeline.threads", "1"}, {"pipeline.chunk_size", "64KiB"}});
  write_version(config, {"u", "v", "w", "x"});
  damage_chunk(container_path(dir_, "s", 1), 2, 0);
  Store store("s", config);
  protect(store, {"u", "v", "w", "x"});
  const std::string message = restart_error(store);
  EXPECT_NE(message.find("regions 'u', 'v', 'w' may have been partly overwritten with version 1's data before the "
                         "failure; 'x' is unchanged"),
            std::string::npos)
      << message;
  EXPECT_TRUE(untouched(3)) << "'x' is unchanged";
  EXPECT_FALSE(untouched(0));
}

TEST_F(FaultSafetyRestart, ADamagedHeaderChangesNoRegion) {
  const Config config = store_config(dir_);
  write_version(config, {"u", "v"});
  flip_bit(container_path(dir_, "s", 1), 12);  // inside the header: found before any chunk is read
  Store store("s", config);
  protect(store, {"u", "v"});
  const std::string message = restart_error(store);
  EXPECT_NE(message.find("(the protected regions are unchanged)"), std::string::npos) << message;
  EXPECT_TRUE(untouched(0) && untouched(1));
}

// Parallel reads stop at the first failure wherever the others are: every
// region the error does not name holds its old bytes.
TEST_F(FaultSafetyRestart, WithParallelReadsEveryRegionCalledUnchangedIs) {
  const std::vector<std::string> labels = {"a", "b", "c", "d", "e", "f", "g", "h"};
  const Config config = store_config(dir_, {{"pipeline.threads", "2"}, {"pipeline.chunk_size", "64KiB"}});
  write_version(config, labels);
  damage_chunk(container_path(dir_, "s", 1), 4, 2);
  Store store("s", config);
  protect(store, labels);
  const std::string message = restart_error(store);
  for (std::size_t r = 0; r < labels.size(); ++r) {
    EXPECT_TRUE(!called_unchanged(message, labels[r]) || untouched(r)) << labels[r] << ": " << message;
  }
  EXPECT_FALSE(untouched(4)) << "the damaged chunk's region was read into";
}

// A copy damaged on L2 is read again from L4: whatever the first try wrote,
// the regions end up holding the version whole.
TEST_F(FaultSafetyRestart, AnIntactCopyElsewhereRestoresEveryRegionWhole) {
  const Config config = store_config(dir_, {{"persistent.path", dir_.path() + "/l4"}, {"persistent.every", "1"},
                                            {"pipeline.chunk_size", "64KiB"}});
  std::vector<std::byte> u(kBytes, std::byte{1}), v(kBytes, std::byte{2});
  {
    Store store("s", config);
    store.protect(0, u.data(), kBytes, "u");
    store.protect(1, v.data(), kBytes, "v");
    store.checkpoint(1);
    store.wait(1, kL4);
  }
  damage_chunk(container_path(dir_, "s", 1), 1, 3);
  std::fill(u.begin(), u.end(), kSentinel);
  std::fill(v.begin(), v.end(), kSentinel);
  Store store("s", config);
  store.protect(0, u.data(), kBytes, "u");
  store.protect(1, v.data(), kBytes, "v");
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(store.last_restart().level, kL4);
  EXPECT_EQ(u, std::vector<std::byte>(kBytes, std::byte{1}));
  EXPECT_EQ(v, std::vector<std::byte>(kBytes, std::byte{2}));
}

// ------------------------------------------------------------ fork safety

std::map<std::string, std::vector<std::byte>> files_under(const std::string& root) {
  std::map<std::string, std::vector<std::byte>> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files[entry.path().string()] = read_file(entry.path().string());
  }
  return files;
}

// The child's exit runs the Store's destructor, atexit handlers and static
// destructors; before issue 26 the destructor joined the parent's threads
// and hung.
TEST(FaultSafetyFork, AChildExitingWithAnOpenStoreEndsAtOnceAndTheParentGoesOn) {
  TempDir dir;
  std::vector<double> u(100000, 1.0);
  std::optional<Store> store(std::in_place, "s", store_config(dir));
  store->protect(0, u.data(), u.size() * sizeof(double), "u");
  store->checkpoint(1);
  store->wait(1, kL2);
  const auto before = files_under(dir.path());
  const pid_t parent = ::getpid();
  const int status = run_child(
      [&] {
        try {
          store->checkpoint(2);
          child_check(false, 2, "checkpoint in the child did not throw");
        } catch (const StateError& error) {
          const std::string message = error.what();
          child_check(message.find("belongs to process " + std::to_string(parent)) != std::string::npos, 3, message);
          child_check(message.find("open a store of its own") != std::string::npos, 4, message);
        }
        bool refused = false;
        try {
          store->versions();
        } catch (const StateError&) {
          refused = true;
        }
        child_check(refused, 5, "versions in the child did not throw");
        store->close();
        store.reset();
        // The inherited store is leaked on purpose (store.cpp), which
        // LeakSanitizer would report at exit: under a sanitizer the child
        // ends once the Store's destructor has run, without the exit checks.
        if (kSanitized) ::_exit(0);
        std::exit(0);
      },
      seconds(30));
  ASSERT_EQ(status, 0) << (status == kHung ? "the child hung" : "the child failed");
  EXPECT_EQ(files_under(dir.path()), before) << "the child wrote or removed files";
  EXPECT_THROW(Store("s", store_config(dir)), StateError) << "the parent's lock was released";
  std::fill(u.begin(), u.end(), 2.0);
  store->checkpoint(2);
  store->wait(2, kL2);
  std::fill(u.begin(), u.end(), 0.0);
  EXPECT_EQ(store->restart(1), 1);
  EXPECT_EQ(u, std::vector<double>(u.size(), 1.0));
  EXPECT_EQ(store->restart(2), 2);
  EXPECT_EQ(u, std::vector<double>(u.size(), 2.0));
}

TEST(FaultSafetyFork, AStoreMovedOverInTheChildIsLeftAlone) {
  if (kSanitized) {
    GTEST_SKIP() << "the child opens a store (starts threads) after a multi-threaded fork, which the sanitizers' "
                    "runtimes do not support (tests/sanitized.h); the plain build runs it";
  }
  TempDir dir;
  std::vector<double> u(1000, 1.0);
  Store store("s", store_config(dir));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  const int status = run_child(
      [&] {
        TempDir own;
        store = Store("mine", store_config(own));  // the inherited one is dropped, not closed
        store.protect(0, u.data(), u.size() * sizeof(double), "u");
        store.checkpoint(1);
        store.wait(1, kL2);
        store.close();
      },
      seconds(30));
  ASSERT_EQ(status, 0) << (status == kHung ? "the child hung" : "the child failed");
  store.wait(1, kL2);
  EXPECT_EQ(store.latest(), 1);
}

// ------------------------------------------------------ termination flush

std::atomic<int> g_handled{0};  // signals the application's own handler saw (per process)
extern "C" void count_signal(int) { ++g_handled; }

void count_termination_signals() {
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// The flush takes its time while the signals keep coming: the pipe fills,
// and a handler that blocked on it would stop every thread it interrupts.
TEST(FaultSafetyTermination, AFloodOfSignalsHangsNothing) {
  const int status = run_child([] {
    count_termination_signals();
    std::atomic<bool> flood_over{false};
    std::atomic<int> flushes{0};
    auto flush = std::make_unique<autockpt::TerminationFlush>([&](int) {
      flood_over.wait(false);
      ++flushes;
    });
    std::thread flood([&] {
      for (int i = 0; i < 100000; ++i) ::raise(i % 2 == 0 ? SIGINT : SIGTERM);
      flood_over = true;
      flood_over.notify_all();
    });
    flood.join();
    flush.reset();  // joins the watcher, which flushed once and re-raised
    child_check(flushes == 1, 2, "flushes: " + std::to_string(flushes));
  });
  EXPECT_EQ(status, 0) << (status == kHung ? "hung" : "failed");
}

// A process forked by the application inherits the handlers and the pipe,
// not the watcher: its signals must not flush (and end) the parent, and
// destroying the object there must neither hang nor stop the parent's watcher.
TEST(FaultSafetyTermination, AForkedChildNeitherSignalsNorStopsTheParentsWatcher) {
  const int status = run_child([] {
    count_termination_signals();
    std::atomic<int> flushed_signal{0};
    auto* flush = new autockpt::TerminationFlush([&](int signal) {
      flushed_signal = signal;
      flushed_signal.notify_all();
    });
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::raise(SIGINT);
      delete flush;
      ::_exit(g_handled == 1 ? 0 : 7);
    }
    int grandchild_status = 0;
    ::waitpid(grandchild, &grandchild_status, 0);
    child_check(WIFEXITED(grandchild_status) && WEXITSTATUS(grandchild_status) == 0, 2,
                "the grandchild's own handler did not get its SIGINT");
    ::raise(SIGTERM);
    flushed_signal.wait(0);
    child_check(flushed_signal == SIGTERM, 3, "flushed for signal " + std::to_string(flushed_signal));
    delete flush;
  });
  EXPECT_EQ(status, 0) << (status == kHung ? "hung" : "failed");
}

// ------------------------------------------------------- mprotect tracker

using track::PageMapping;
using track::MappingCount;
using track::pages_of;

extern "C" void exit_7_on_fault(int) { ::_exit(7); }

// An application installs its own SIGSEGV handler after the tracker's
// (one that does not chain): the next collect notices, gives every page
// back writable and moves the region to hashing, so the writes after it
// reach no handler and are still tracked.
TEST(FaultSafetyMprotect, AReplacedHandlerIsNoticedAtCollectAndTheRegionMovesToHash) {
  const int status = run_child([] {
    const Logger log("t", LogLevel::kOff);
    const auto tracker = track::open_tracker(TrackMethod::kMprotect, log);
    PageMapping memory(4);
    tracker->watch(1, memory.base(), memory.bytes());
    tracker->collect(1, 1);  // write-protects the pages
    *memory.page(0) = std::byte{1};
    child_check(tracker->collect(1, 1) == pages_of(4, {0}), 2, "tracked by mprotect");
    struct sigaction own {};
    own.sa_handler = exit_7_on_fault;
    sigemptyset(&own.sa_mask);
    ::sigaction(SIGSEGV, &own, nullptr);
    child_check(tracker->collect(1, 1) == track::every_page(4), 3, "the first collect of hash reports every page");
    child_check(tracker->method_of(1) == TrackMethod::kHash, 4, "moved to hash");
    *memory.page(2) = std::byte{1};  // no fault: the page is writable again
    child_check(tracker->collect(1, 1) == pages_of(4, {2}), 5, "tracked by hash");
    PageMapping later(1);
    tracker->watch(2, later.base(), later.bytes());  // never protected again
    child_check(tracker->method_of(2) == TrackMethod::kHash, 6, "a new region is hashed");
  });
  EXPECT_EQ(status, 0) << (status == kHung ? "hung" : "failed");
}

// A SIGSEGV sent by kill() or raise() that the application ignored before
// the tracker came stays ignored.
TEST(FaultSafetyMprotect, AnIgnoredSignalSentByRaiseStaysIgnored) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the tracker comes after SIG_IGN
  EXPECT_EXIT(
      {
        ::signal(SIGSEGV, SIG_IGN);
        auto tracker = track::make_mprotect_tracker();
        ::raise(SIGSEGV);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Scattered faults may split every watched page into a mapping of its own:
// the pages watched stay within what vm.max_map_count leaves beside the
// mappings in use and half the limit.
TEST(FaultSafetyMprotect, TheMappingBudgetCountsTheMappingsInUse) {
  const std::size_t page = track::page_size();
  PageMapping memory(401);  // never touched: address space only
  auto tracker = track::make_mprotect_tracker([] { return MappingCount{1000, 100}; });  // 400 pages left
  tracker->watch(1, memory.base(), 400 * page);
  try {
    tracker->watch(2, memory.page(400), page);
    ADD_FAILURE() << "a page past the budget was watched";
  } catch (const track::Unavailable& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("401 watched pages"), std::string::npos) << message;
    EXPECT_NE(message.find("vm.max_map_count (1000)"), std::string::npos) << message;
    EXPECT_NE(message.find("the 100 mappings the process holds"), std::string::npos) << message;
  }
  tracker->unwatch(1);
  EXPECT_NO_THROW(tracker->watch(2, memory.page(400), page));
  auto crowded = track::make_mprotect_tracker([] { return MappingCount{65530, 65000}; });
  EXPECT_THROW(crowded->watch(3, memory.base(), page), track::Unavailable);
}

// Past the budget the region is hashed; the first fallback is a warning,
// the next ones info lines.
TEST(FaultSafetyMprotect, RegionsPastTheBudgetAreHashedWithOneWarning) {
  const MappingCount mappings = track::count_mappings();
  const std::size_t pages = mappings.limit / 2 + 1;
  PageMapping first(pages);  // address space only
  PageMapping second(pages);
  const Logger log("t", LogLevel::kInfo);
  const auto tracker = track::open_tracker(TrackMethod::kMprotect, log);
  ::testing::internal::CaptureStderr();
  tracker->watch(1, first.base(), first.bytes());
  tracker->watch(2, second.base(), second.bytes());
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(tracker->method_of(1), TrackMethod::kHash);
  EXPECT_EQ(tracker->method_of(2), TrackMethod::kHash);
  EXPECT_EQ(logged.find(" warn: region 1 is tracked by hash"), logged.rfind(" warn: ")) << logged;
  EXPECT_NE(logged.find(" info: region 2 is tracked by hash"), std::string::npos) << logged;
  tracker->unwatch(1);
  tracker->unwatch(2);
}

// ------------------------------------------------------ eager pin token

// Another holder of the node's token (here a second token object of the
// same process; another process excludes it the same way) keeps the eager
// pin waiting inside the checkpoint that builds the buffer; it gives up after
// buffer.pin_token_timeout and the copies go on unpinned.
TEST(FaultSafetyPinToken, TheEagerPinGivesUpAfterTheTimeoutAndCheckpointReturns) {
  TempDir dir;
  TempDir token_dir;
  const gpu::RegistrationToken other(token_dir.path(), "pin");
  const gpu::RegistrationToken::Hold held = other.try_acquire();
  ASSERT_TRUE(held);
  const Config config = store_config(dir, {{"device.backend", "host"},
                                           {"device.capacity", "0"},
                                           {"buffer.pin", "eager"},
                                           {"buffer.pin_token_dir", token_dir.path()},
                                           {"buffer.pin_token_timeout", "0.3s"}});
  std::vector<float> device(100000, 1.0f);
  Store store("s", config);
  store.protect_device(0, device.data(), device.size() * sizeof(float), "d");
  const auto started = std::chrono::steady_clock::now();
  store.checkpoint(1);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 10.0);
  const std::optional<LatePinStats> staging = store.device_stats().staging;
  ASSERT_TRUE(staging);
  EXPECT_EQ(staging->state, LatePinState::kPinFailed);
  EXPECT_NE(staging->pin_failure.find(other.path()), std::string::npos) << staging->pin_failure;
  store.wait(1, kL2);
  std::fill(device.begin(), device.end(), 0.0f);
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(device, std::vector<float>(device.size(), 1.0f));
}

TEST(FaultSafetyPinToken, TheTokenLivesInADirectoryOfTheUsersOwn) {
  TempDir shared;
  ASSERT_EQ(::chmod(shared.path().c_str(), 01777), 0);  // as /dev/shm: sticky, writable by all
  const gpu::RegistrationToken token(shared.path(), "pin");
  ASSERT_TRUE(token.try_acquire());
  const fs::path own = fs::path(token.path()).parent_path();
  EXPECT_EQ(own, fs::path(shared.path()) / ("resurgo-" + std::to_string(::geteuid())));
  EXPECT_EQ(fs::status(own).permissions(), fs::perms::owner_all);
  ASSERT_EQ(::chmod(own.c_str(), 0777), 0);  // another user could plant or hold a file there
  EXPECT_THROW(token.try_acquire(), StorageError);
}

// ---------------------------------------------------------------- protect

// Runs `call` with the address space limited to what the process maps now
// plus `headroom` bytes: a mapping larger than that fails with ENOMEM. The
// store's threads then allocate from arenas that exist already. Once, under
// ctest's load, a child aborted in glibc ("failed to register TLS
// destructor: out of memory"), probably a store thread whose first
// allocation fell in the window and needed an arena of its own (64 MiB of
// address space).
void with_address_space_limit(std::size_t headroom, const std::function<void()>& call) {
  ::mallopt(M_ARENA_MAX, 1);
  std::size_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  rlimit previous{};
  ::getrlimit(RLIMIT_AS, &previous);
  rlimit limited = previous;
  limited.rlim_cur = static_cast<rlim_t>(pages * track::page_size() + headroom);
  ::setrlimit(RLIMIT_AS, &limited);
  call();
  ::setrlimit(RLIMIT_AS, &previous);
}

constexpr std::size_t kRegionBytes = std::size_t{64} << 20;  // its buffer (twice as large) cannot be mapped
constexpr std::size_t kHeadroom = std::size_t{16} << 20;

// The region is added, then its buffer cannot be made: nothing stays
// registered, and the same id and label are protected once memory is back.
// Returns the exit status of the death test below.
int protect_fails_then_succeeds() {
  TempDir dir;
  const std::unique_ptr<std::byte[]> memory(new std::byte[kRegionBytes]);  // never touched
  Store store("s", store_config(dir));
  with_address_space_limit(kHeadroom, [&] {
    try {
      store.protect(3, memory.get(), kRegionBytes, "big");
      child_check(false, 2, "protect did not fail");
    } catch (const StorageError&) {
    }
  });
  try {
    store.checkpoint(1);
    child_check(false, 3, "a region stayed registered");
  } catch (const InvalidArgumentError& error) {
    child_check(std::string(error.what()).find("nothing is protected") != std::string::npos, 4, error.what());
  }
  store.protect(3, memory.get(), kRegionBytes, "big");
  store.checkpoint(1);
  store.wait(1, kL2);
  return 0;
}

TEST(FaultSafetyProtect, AFailedProtectLeavesNothingRegistered) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a process of its own for the limit
  EXPECT_EXIT(std::exit(protect_fails_then_succeeds()), ::testing::ExitedWithCode(0), "");
}

// The same through the C API: an error code, then RSG_OK for the same id
// and label.
int c_protect_fails_then_succeeds() {
  TempDir dir;
  ::setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
  ::setenv("RESURGO_PERSISTENT_EVERY", "0", 1);
  const std::unique_ptr<std::byte[]> memory(new std::byte[kRegionBytes]);
  rsg_store* store = nullptr;
  // Each code is taken before rsg_last_error() is read: an argument list has no order.
  const auto expect = [](int code, int wanted, int check) { child_check(code == wanted, check, rsg_last_error()); };
  expect(rsg_open(nullptr, "c", &store), RSG_OK, 2);
  expect(rsg_protect(store, 1, nullptr, kRegionBytes, "big"), RSG_EINVAL, 3);
  with_address_space_limit(kHeadroom, [&] {
    expect(rsg_protect(store, 1, memory.get(), kRegionBytes, "big"), RSG_ESTORAGE, 4);
  });
  expect(rsg_protect(store, 1, memory.get(), kRegionBytes, "big"), RSG_OK, 5);
  expect(rsg_checkpoint(store, 1), RSG_OK, 6);
  expect(rsg_close(store), RSG_OK, 7);
  return 0;
}

TEST(FaultSafetyProtect, AFailedProtectThroughTheCApiCanBeRepeated) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(c_protect_fails_then_succeeds()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace resurgo
