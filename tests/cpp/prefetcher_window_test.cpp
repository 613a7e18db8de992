// What one pass of the prefetcher costs in an adjoint run of small states
// (issue 27): the order names thousands of restores, most of versions not
// written yet, and a pass runs at every commit and restore. A pass asks the
// levels only about the versions the memory level could hold (a lookup on
// a directory level is a file system call), and a restore or a discard that
// leaves the thread nothing to do does not wake it (the woken thread would
// take the restoring thread's CPU first on a busy machine). A copy of a
// version discarded meanwhile reports no failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/trace.h"
#include "chain_files.h"
#include "forwarding_level.h"
#include "pipeline/prefetcher.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "tier/memory_level.h"

namespace resurgo {
namespace {

// Two versions fit in one 2 MiB piece of the memory level, a third does not.
constexpr std::uint64_t kVersionBytes = 1008u << 10;

// The slower level the prefetcher copies from, counting the lookups.
class CountingLevel : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;
  bool holds(int version) override {
    ++lookups;
    return level_.holds(version);
  }
  std::atomic<int> lookups{0};
};

class PrefetcherWindowTest : public ::testing::Test {
 protected:
  void write(int version) {
    const std::vector<format::RegionEntry> regions{{0, "u", format::RegionKind::kHost, kVersionBytes, "", {}}};
    slow.commit(version, chain_file("s", version, -1, regions, {}, kVersionBytes));
  }
  // Runs `event`, which starts a pass, and waits for that pass.
  void pass_after(const std::function<void()>& event) {
    const std::uint64_t before = prefetcher.passes();
    event();
    ASSERT_TRUE(eventually([&] { return prefetcher.passes() > before; }));
  }
  // Runs `event` and returns the passes made once the thread had time to
  // start one (it does within microseconds when woken).
  std::uint64_t passes_after(const std::function<void()>& event) {
    event();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return prefetcher.passes();
  }
  // Memory for two versions of kVersionBytes, however the level rounds them.
  std::uint64_t two_versions() {
    write(1);
    return 2 * MemoryLevel("probe", 0, 64u << 20, 0).footprint(slow.open(1)->size());
  }

  MemoryLevel slow{"s", 0, 256u << 20, 0};
  CountingLevel source{slow};
  MemoryLevel memory{"s", 0, two_versions(), 0};
  Logger log{"window", LogLevel::kError};
  Trace trace{""};
  Prefetcher prefetcher{memory, [this] { return std::vector<Level*>{&source}; }, log, trace};
};

TEST_F(PrefetcherWindowTest, APassAsksTheLevelsOnlyAboutTheVersionsMemoryCouldHold) {
  std::vector<int> order{1};
  for (int unwritten = 100; unwritten < 150; ++unwritten) order.push_back(unwritten);
  order.push_back(2);
  write(2);
  pass_after([&] { prefetcher.set_order(order); });
  ASSERT_TRUE(eventually([&] { return memory.holds(1); }));
  source.lookups = 0;
  constexpr int kCommits = 10;
  for (int commit = 0; commit < kCommits; ++commit) pass_after([&] { prefetcher.poke(); });
  // Versions 1 and 100 fill the window: one lookup per pass (100, not
  // written yet), not one per version of the order.
  EXPECT_LE(source.lookups, 2 * kCommits);
  EXPECT_FALSE(memory.holds(2)) << "version 2 comes after 50 versions that need the memory first";
  write(100);
  prefetcher.poke();
  EXPECT_TRUE(eventually([&] { return memory.holds(100); })) << "a version of the window is fetched once written";
}

TEST_F(PrefetcherWindowTest, ARestoreMovesTheWindowOn) {
  write(2);
  write(3);
  pass_after([&] { prefetcher.set_order({1, 2, 3}); });
  ASSERT_TRUE(eventually([&] { return memory.holds(1) && memory.holds(2); }));
  EXPECT_FALSE(memory.holds(3));
  prefetcher.restored(1);
  EXPECT_TRUE(eventually([&] { return memory.holds(3); })) << "version 1, not needed again, made room for version 3";
}

TEST_F(PrefetcherWindowTest, ARestoreOrADiscardLeavingNothingToFetchWakesNothing) {
  write(2);
  pass_after([&] { prefetcher.set_order({1, 2, 1}); });
  ASSERT_TRUE(eventually([&] { return memory.holds(1) && memory.holds(2); }));
  const std::uint64_t fetched = passes_after([] {});
  EXPECT_EQ(passes_after([&] { prefetcher.restored(1); }), fetched);
  EXPECT_EQ(passes_after([&] { prefetcher.restored(2); }), fetched);
  EXPECT_EQ(passes_after([&] { prefetcher.forget(2); }), fetched);
  EXPECT_TRUE(memory.holds(1)) << "version 1 is still needed";
}

// A level whose copy of a version turns out damaged when the prefetcher
// copies it (its second open: the first finds the size), once the test lets
// it go on: what a scratch level's file reads as when a later version was
// written over it meanwhile (DirectoryLevel::set_scratch).
class OverwrittenLevel : public testing::ForwardingLevel {
 public:
  using ForwardingLevel::ForwardingLevel;
  std::unique_ptr<ReadableFile> open(int version) override {
    if (!sized.exchange(true)) return level_.open(version);
    opened = true;
    while (!go_on) std::this_thread::yield();
    throw CorruptionError("version " + std::to_string(version) + ": chunk 0 fails its checksum");
  }
  std::atomic<bool> sized{false};
  std::atomic<bool> opened{false};
  std::atomic<bool> go_on{false};
};

// A failed copy is reported to the restart of its version (settle), unless
// the version was discarded while it was copied: then what the copy found
// no longer matters.
TEST_F(PrefetcherWindowTest, ACopyOfAVersionDiscardedMeanwhileReportsNoFailure) {
  for (const bool discarded : {false, true}) {
    SCOPED_TRACE(discarded ? "discarded while copied" : "kept");
    MemoryLevel target{"t", 0, 64u << 20, 0};
    OverwrittenLevel overwritten{slow};
    Prefetcher fetching{target, [&] { return std::vector<Level*>{&overwritten}; }, log, trace};
    fetching.set_order({1});
    ASSERT_TRUE(eventually([&] { return overwritten.opened.load(); }));
    if (discarded) fetching.forget(1);
    overwritten.go_on = true;
    const std::optional<std::string> failure = fetching.settle(1);
    EXPECT_EQ(failure.has_value(), !discarded) << failure.value_or("");
    EXPECT_FALSE(target.holds(1));
  }
}

}  // namespace
}  // namespace resurgo
