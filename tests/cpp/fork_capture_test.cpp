// capture.mode = "fork": the child writes the version from its copy-on-write
// image; failures of fork and of the child become the version's background
// error; close waits for the child; a dead parent leaves nothing partial;
// the huge pages a child split are collapsed again once it exits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "capture/fork_capture.h"
#include "capture/huge_page_collapse.h"
#include "capture/mappings.h"
#include "hook_env.h"
#include "resurgo/errors.hpp"
#include "forwarding_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "writer_gate.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

// Forwards to the POSIX Env; in a forked child (another pid than the test's)
// a file's second append kills the child with SIGKILL: a write cut short.
class KillChildMidWriteEnv final : public ForwardingEnv {
 public:
  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    return std::make_unique<File>(base_->create(path, mode), test_pid_);
  }

 private:
  class File final : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> base, pid_t test_pid) : base_(std::move(base)), test_pid_(test_pid) {}
    void append(const void* data, std::size_t bytes) override {
      if (++appends_ == 2 && ::getpid() != test_pid_) ::raise(SIGKILL);
      base_->append(data, bytes);
    }
    void sync() override { base_->sync(); }
    void close() override { base_->close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    std::unique_ptr<WritableFile> base_;
    pid_t test_pid_;
    int appends_ = 0;
  };
  pid_t test_pid_ = ::getpid();
};

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) found.push_back(name);
  }
  return found;
}

// Anonymous memory aligned to the huge page size, advised MADV_HUGEPAGE or
// not, unmapped on destruction.
class AlignedMemory {
 public:
  AlignedMemory(std::size_t bytes, bool advise_huge_pages) : bytes_(bytes) {
    const std::size_t huge = std::max<std::size_t>(huge_page_bytes(), 4096);
    mapped_bytes_ = bytes + huge;
    mapped_ = ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped_ == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    data_ = reinterpret_cast<double*>((reinterpret_cast<std::uintptr_t>(mapped_) + huge - 1) / huge * huge);
    if (advise_huge_pages) ::madvise(data_, bytes, MADV_HUGEPAGE);  // EINVAL without THP: the tests skip
  }
  ~AlignedMemory() { ::munmap(mapped_, mapped_bytes_); }
  AlignedMemory(const AlignedMemory&) = delete;
  AlignedMemory& operator=(const AlignedMemory&) = delete;

  double* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  std::size_t count() const { return bytes_ / sizeof(double); }
  // Writes every page: each value becomes seed * 1e6 + its index.
  void fill(double seed) {
    for (std::size_t i = 0; i < count(); ++i) data_[i] = seed * 1e6 + static_cast<double>(i);
  }
  std::vector<double> values() const { return {data_, data_ + count()}; }

 private:
  std::size_t bytes_;
  std::size_t mapped_bytes_;
  void* mapped_;
  double* data_;
};

// Waits (at most 10 s) until a collapse pass ended after `passes_before`.
bool collapse_pass_ended(std::uint64_t passes_before) {
  for (int i = 0; i < 1000; ++i) {
    if (huge_page_collapse_totals().passes > passes_before) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class ForkCaptureTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ForkCapture::set_fork_function_for_testing(nullptr);
    set_huge_page_collapse_for_testing(true);
  }
  Config config(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.path", dir.path() + "/l4"},
                                               {"persistent.every", "0"},
                                               {"capture.mode", "fork"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::string l2_dir() const { return dir.path() + "/l2/f"; }

  TempDir dir;
};

std::vector<double> field(std::size_t count, double seed) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = seed * 1000.0 + static_cast<double>(i);
  return values;
}

// The child holds the state as it was at fork: the parent may overwrite it
// at once. A pipe holds the child back until the parent has written, so the
// copy-on-write duplication is certain and measured.
TEST_F(ForkCaptureTest, ChildWritesTheStateAsItWasAtForkWhileTheParentOverwritesIt) {
  WriterGate gate;
  std::vector<double> u = field(1 << 20, 1);  // 8 MiB
  const std::vector<double> at_checkpoint = u;
  Store store("f", config(), gate.env());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  std::fill(u.begin(), u.end(), -1.0);  // every page duplicated while the child waits
  gate.open();
  store.wait(1, kL2);
  const VersionStats stats = store.stats().at(0);
  EXPECT_EQ(stats.capture, "fork");
  EXPECT_GE(stats.copy_on_write_bytes, u.size() * sizeof(double) / 2) << "the child saw no duplicated pages";
  EXPECT_GT(stats.at(kL2)->stored_bytes, u.size() * sizeof(double));
  EXPECT_EQ(store.restart(1), 1);
  EXPECT_EQ(u, at_checkpoint);
}

TEST_F(ForkCaptureTest, RefusedForkFailsThatVersionAndTheStoreKeepsWorking) {
  std::vector<double> u = field(4096, 2);
  Store store("f", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  ForkCapture::set_fork_function_for_testing([]() -> pid_t {
    errno = ENOMEM;
    return -1;
  });
  store.checkpoint(1);  // returns: the failure is the version's, in the background
  try {
    store.wait(1, kL2);
    FAIL() << "a version whose fork failed was reported durable";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("fork for checkpoint 1 failed"), std::string::npos) << error.what();
  }
  ForkCapture::set_fork_function_for_testing(nullptr);
  store.checkpoint(2);
  store.wait(2, kL2);
  EXPECT_EQ(store.latest(), 2);
}

TEST_F(ForkCaptureTest, ChildKilledMidWriteLeavesThePreviousVersion) {
  std::vector<double> u = field(1 << 18, 3);  // 2 MiB: several appends
  const std::vector<double> first = u;
  {
    Store store("f", config({{"pipeline.chunk_size", "64KiB"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(1);
    store.wait(1, kL2);
  }
  Store store("f", config({{"pipeline.chunk_size", "64KiB"}}), std::make_shared<KillChildMidWriteEnv>());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  std::fill(u.begin(), u.end(), 7.0);
  store.checkpoint(2);
  try {
    store.wait(2, kL2);
    FAIL() << "a version whose writer was killed was reported durable";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find("killed by signal"), std::string::npos) << error.what();
  }
  EXPECT_EQ(store.latest(), 1);
  EXPECT_EQ(store.restart(), 1);
  EXPECT_EQ(u, first);
  store.close();
  Store reopened("f", config());  // removes the dead child's temporary
  EXPECT_TRUE(temporaries(l2_dir()).empty());
}

TEST_F(ForkCaptureTest, CloseWaitsForTheChildInFlight) {
  std::vector<double> u = field(1 << 20, 4);
  const std::vector<double> saved = u;
  {
    Store store("f", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(5);
    store.close();
  }
  std::fill(u.begin(), u.end(), 0.0);
  Store store("f", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(store.restart(), 5);
  EXPECT_EQ(u, saved);
}

// The child has its own image: memory the application unmaps after
// checkpoint() returns is still written (the documented contract).
TEST_F(ForkCaptureTest, MemoryUnmappedAfterCheckpointReturnsIsStillWritten) {
  const std::size_t bytes = 4u << 20;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  std::memset(memory, 0x5a, bytes);
  {
    Store store("f", config());
    store.protect(0, memory, bytes, "m");
    store.checkpoint(1);
    ASSERT_EQ(::munmap(memory, bytes), 0);
    store.wait(1, kL2);
    store.unprotect(0);
  }
  std::vector<unsigned char> back(bytes);
  Store store("f", config());
  store.protect(0, back.data(), bytes, "m");
  EXPECT_EQ(store.restart(), 1);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x5a), static_cast<std::ptrdiff_t>(bytes));
}

TEST_F(ForkCaptureTest, DontForkMemoryIsRefusedNamingTheRegion) {
  const std::size_t bytes = 1u << 20;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  ASSERT_EQ(::madvise(memory, bytes, MADV_DONTFORK), 0);
  Store store("f", config());
  store.protect(0, memory, bytes, "pinned-buffer");
  try {
    store.checkpoint(1);
    FAIL() << "a region hidden from the child was accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("pinned-buffer"), std::string::npos) << error.what();
  }
  store.unprotect(0);
  ::munmap(memory, bytes);
}

TEST_F(ForkCaptureTest, AutoCopiesWhatFitsTheBufferAndForksTheRest) {
  std::vector<double> small = field(1024, 5);
  std::vector<double> large = field(1 << 17, 6);  // 1 MiB
  Store store("f", config({{"capture.mode", "auto"}, {"buffer.capacity", "256KiB"}}));
  store.protect(0, small.data(), small.size() * sizeof(double), "small");
  store.checkpoint(1);
  store.protect(1, large.data(), large.size() * sizeof(double), "large");
  store.checkpoint(2);
  store.wait(kAllVersions, kL2);
  const auto stats = store.stats();
  EXPECT_EQ(stats.at(0).capture, "copy");
  EXPECT_EQ(stats.at(1).capture, "fork");
  const auto saved = large;
  std::fill(large.begin(), large.end(), 0.0);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_EQ(large, saved);
}

// A forked writer inherits every descriptor of the application, the lock
// files of its other stores too. It must not keep them locked: another store
// of the process, closed and reopened while the writer runs, opens. (The
// stress campaign found this: "is locked" on reopening a copy-mode store.)
TEST_F(ForkCaptureTest, WriterInFlightDoesNotHoldTheLocksOfOtherStores) {
  WriterGate gate;
  std::vector<double> u = field(4096, 8);
  std::vector<double> v = field(4096, 9);
  auto other = std::make_unique<Store>("other", config({{"capture.mode", "copy"}}));
  other->protect(0, v.data(), v.size() * sizeof(double), "v");
  Store forking("f", config(), gate.env());
  forking.protect(0, u.data(), u.size() * sizeof(double), "u");
  forking.checkpoint(1);  // its writer now waits at the gate
  other->close();
  other.reset();
  std::string reopen_error;
  try {
    Store reopened("other", config({{"capture.mode", "copy"}}));
  } catch (const StateError& error) {
    reopen_error = error.what();
  }
  gate.open();
  forking.wait(1, kL2);
  EXPECT_EQ(reopen_error, "") << "the forked writer of store 'f' held the lock of store 'other'";
}

// A killed application takes its child with it (PR_SET_PDEATHSIG): nothing
// partial is visible, and the next open removes the child's temporary.
TEST_F(ForkCaptureTest, ParentKilledWhileTheChildWritesLeavesNothingPartial) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const Config settings = config();
  const pid_t application = ::fork();
  ASSERT_GE(application, 0);
  if (application == 0) {
    int gate[2];
    if (::pipe(gate) != 0) ::_exit(3);
    auto env = std::make_shared<HookEnv>();
    const pid_t self = ::getpid();
    env->before_create = [&](const std::string&) {
      if (::getpid() == self) return;
      if (::write(ready[1], "c", 1) != 1) ::_exit(9);  // the child is about to write: kill the application now
      char byte = 0;
      while (::read(gate[0], &byte, 1) != 0) {  // never written: blocks until killed
      }
    };
    std::vector<double> u = field(1 << 16, 7);
    Store store("f", settings, env);
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(1);
    for (;;) ::pause();
  }
  // Only the application and its forked writer hold the write end now: EOF
  // on the read end means both are gone (the writer's store lock with them).
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::kill(application, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(application, &status, 0), application);
  // The orphaned writer dies of SIGKILL from PDEATHSIG.
  while (::read(ready[0], &byte, 1) > 0) {
  }
  Store store("f", config());
  EXPECT_FALSE(store.latest().has_value());
  EXPECT_TRUE(temporaries(l2_dir()).empty());
  ::close(ready[0]);
}

// The parent's writes while a child lives split its huge pages (copy on
// write per 4 KiB); once the child exited they are huge again, so the next
// fork copies one page-table entry per huge page, as the first did. The
// split is the kernel's choice: once in a while (seen under ASan) a round's
// write left the huge pages whole, which leaves that round nothing to
// collapse; the test needs at least one round that split.
TEST_F(ForkCaptureTest, HugePagesSplitWhileTheChildWritesAreCollapsedOnceItExits) {
  constexpr std::size_t kBytes = 8u << 20;
  AlignedMemory u(kBytes, true);
  u.fill(1);
  if (anon_huge_page_bytes_at(u.data()) < kBytes) {
    GTEST_SKIP() << "no transparent huge pages at first touch (" << anon_huge_page_bytes_at(u.data())
                 << " of " << kBytes << " bytes; THP disabled, or no free huge page): nothing to collapse";
  }
  WriterGate gate;
  Store store("f", config(), gate.env());
  store.protect(0, u.data(), u.bytes(), "u");
  int rounds_split = 0;
  for (int version = 1; version <= 3; ++version) {
    const std::uint64_t passes = huge_page_collapse_totals().passes;
    store.checkpoint(version);
    u.fill(version + 1);  // the child still waits at the gate: the huge pages split
    if (anon_huge_page_bytes_at(u.data()) < kBytes) ++rounds_split;
    gate.open();
    store.wait(version, kL2);
    ASSERT_TRUE(collapse_pass_ended(passes)) << "no collapse after the writer of version " << version;
    EXPECT_EQ(anon_huge_page_bytes_at(u.data()), kBytes) << "after the writer of version " << version;
  }
  if (rounds_split == 0) GTEST_SKIP() << "copy on write left the huge pages whole in all 3 rounds: nothing was split";
}

// Only memory that transparent huge pages may back is collapsed: in the
// `madvise` mode a mapping the application did not advise MADV_HUGEPAGE
// keeps its small pages (MADV_COLLAPSE itself would ignore the mode).
TEST_F(ForkCaptureTest, MemoryNotAdvisedForHugePagesIsLeftInSmallPages) {
  constexpr std::size_t kBytes = 4u << 20;
  AlignedMemory advised(kBytes, true);
  AlignedMemory plain(kBytes, false);
  advised.fill(1);
  plain.fill(2);
  if (anon_huge_page_bytes_at(advised.data()) < kBytes || anon_huge_page_bytes_at(plain.data()) > 0) {
    GTEST_SKIP() << "needs the THP mode `madvise` (advised memory in huge pages, the rest not); here "
                 << anon_huge_page_bytes_at(advised.data()) << " and " << anon_huge_page_bytes_at(plain.data())
                 << " bytes of huge pages";
  }
  Store store("f", config());
  store.protect(0, advised.data(), advised.bytes(), "advised");
  store.protect(1, plain.data(), plain.bytes(), "plain");
  const std::uint64_t passes = huge_page_collapse_totals().passes;
  store.checkpoint(1);
  store.wait(1, kL2);
  ASSERT_TRUE(collapse_pass_ended(passes));
  EXPECT_EQ(anon_huge_page_bytes_at(advised.data()), kBytes);
  EXPECT_EQ(anon_huge_page_bytes_at(plain.data()), 0u);
}

// Versions written by children forked while collapse passes run, or are
// stopped by the next fork, restore bit for bit; with the collapse off
// (the baseline) too.
TEST_F(ForkCaptureTest, VersionsRestoreBitForBitAcrossForksWithAndWithoutTheCollapse) {
  for (const bool collapse : {true, false}) {
    set_huge_page_collapse_for_testing(collapse);
    AlignedMemory u(6u << 20, true);
    std::vector<std::vector<double>> saved;
    Store store(collapse ? "with" : "without", config({{"local.keep", "0"}}));
    store.protect(0, u.data(), u.bytes(), "u");
    for (int version = 0; version < 5; ++version) {
      u.fill(version);
      saved.push_back(u.values());
      store.checkpoint(version);
      if (version % 2 == 1) store.wait(version, kL2);  // a pass between these forks; none before the others
    }
    store.wait(kAllVersions, kL2);
    for (int version = 0; version < 5; ++version) {
      u.fill(-1);
      ASSERT_EQ(store.restart(version), version);
      EXPECT_EQ(u.values(), saved[static_cast<std::size_t>(version)]) << "version " << version << ", collapse "
                                                                     << collapse;
    }
  }
}

}  // namespace
}  // namespace resurgo
