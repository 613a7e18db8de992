// track.granularity = "doubling": Appicpr's rule alone (a block is marked
// when the next block was written too; the block doubles when the marked
// blocks are at least half the written ones; it never shrinks), the values
// the key takes and refuses, and the block sizes a delta store records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/config_names.h"
#include "error_text.h"
#include "host_pages.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "track/granularity_tuner.h"
#include "track/tracker.h"
#include "track/tracker_choice.h"

namespace resurgo {
namespace {

using track::GranularityTuner;
using track::PageSet;
using Sizes = std::vector<std::size_t>;

PageSet pages(std::size_t region_pages, const std::vector<std::size_t>& written) {
  PageSet set(region_pages);
  for (std::size_t page : written) set.insert(page);
  return set;
}

PageSet range(std::size_t region_pages, std::size_t first, std::size_t count) {
  PageSet set(region_pages);
  set.insert_range(first, count);
  return set;
}

// The block chosen after each of `steps` intervals writing `written`.
Sizes next_blocks(GranularityTuner& tuner, const PageSet& written, int steps, bool page_resolution = false) {
  Sizes chosen;
  for (int step = 0; step < steps; ++step) {
    chosen.push_back(tuner.observe(written, page_resolution).next_block_pages);
  }
  return chosen;
}

TEST(DoublingGranularityTest, ASlabDoublesEveryIntervalUntilOneBlockHoldsTheRegion) {
  // 4,096 written pages from page 1,024 of 8,192: at 4,096 pages the slab
  // still spans two blocks, so the rule goes on to one block of the whole
  // region, where no block has a next one to mark.
  GranularityTuner doubling = GranularityTuner::doubling();
  EXPECT_EQ(doubling.block_pages(), 1u);
  EXPECT_EQ(next_blocks(doubling, range(8192, 1024, 4096), 15),
            (Sizes{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 8192, 8192}));
}

TEST(DoublingGranularityTest, GrowsPastTheTunersLargestBlock) {
  // The tuner stops at 4 MiB; the slides' rule knows no such bound.
  const std::size_t largest = GranularityTuner::default_max_block_pages();
  GranularityTuner doubling = GranularityTuner::doubling();
  next_blocks(doubling, range(8 * largest, 0, 8 * largest), 40);
  EXPECT_EQ(doubling.block_pages(), 8 * largest);
}

TEST(DoublingGranularityTest, MarkedBlocksAtLeastHalfTheWrittenOnesDouble) {
  // Four written pages; pages 0 and 10 are marked (1 and 11 were written).
  GranularityTuner half = GranularityTuner::doubling();
  EXPECT_EQ(half.observe(pages(64, {0, 1, 10, 11}), false).next_block_pages, 2u);
  // One marked of four: less than half.
  GranularityTuner quarter = GranularityTuner::doubling();
  EXPECT_EQ(quarter.observe(pages(64, {0, 1, 10, 20}), false).next_block_pages, 1u);
}

TEST(DoublingGranularityTest, ScatteredPagesStayAtOnePage) {
  GranularityTuner doubling = GranularityTuner::doubling();
  EXPECT_EQ(next_blocks(doubling, pages(4096, {3, 130, 999, 2047, 4000}), 10), Sizes(10, 1));
}

TEST(DoublingGranularityTest, NeverShrinksWhereTheTunerDoes) {
  // Slabs grow both to 16 pages; scattered pages then halve the tuner's
  // block back to one page (page resolution), never the rule's.
  GranularityTuner doubling = GranularityTuner::doubling();
  GranularityTuner tuner(0, 16);
  for (int step = 0; step < 13; ++step) {
    doubling.observe(range(4096, 0, 4096), true);
    tuner.observe(range(4096, 0, 4096), true);
  }
  ASSERT_EQ(doubling.block_pages(), 4096u);
  ASSERT_EQ(tuner.block_pages(), 16u);
  const PageSet scattered = pages(4096, {5, 700, 2100, 3333});
  EXPECT_EQ(next_blocks(doubling, scattered, 10, true), Sizes(10, 4096));
  EXPECT_EQ(next_blocks(tuner, scattered, 4, true), (Sizes{8, 4, 2, 1}));
  // The rule saves the whole blocks holding a written page.
  EXPECT_EQ(doubling.observe(scattered, true).blocks_to_save, range(4096, 0, 4096));
}

TEST(DoublingGranularityTest, AnIntervalWithoutWritesChangesNothing) {
  GranularityTuner doubling = GranularityTuner::doubling();
  doubling.observe(range(64, 0, 64), false);
  const GranularityTuner::Decision decision = doubling.observe(PageSet(64), false);
  EXPECT_EQ(decision.block_pages_used, 2u);
  EXPECT_EQ(decision.next_block_pages, 2u);
  EXPECT_EQ(decision.blocks_to_save.count(), 0u);
}

TEST(DoublingGranularityTest, TheSettingPicksTheRule) {
  const std::size_t page = track::page_size();
  const PageSet slab = range(8192, 1024, 4096);
  GranularityTuner doubling = GranularityTuner::for_setting(kDoublingGranularity);
  GranularityTuner tuned = GranularityTuner::for_setting(0);
  GranularityTuner fixed = GranularityTuner::for_setting(16 * page);
  GranularityTuner tuner;
  EXPECT_EQ(next_blocks(doubling, slab, 14).back(), 8192u);
  EXPECT_EQ(next_blocks(tuned, slab, 14), next_blocks(tuner, slab, 14));
  EXPECT_NE(tuned.block_pages(), doubling.block_pages());
  EXPECT_EQ(next_blocks(fixed, slab, 14), Sizes(14, 16));
}

// ------------------------------------------------------------ configuration
TEST(DoublingGranularityConfigTest, TakesDoublingInAnyCase) {
  Config config;
  config.set("track.granularity", " Doubling ");
  EXPECT_EQ(config.track.granularity, kDoublingGranularity);
  config.set("track.granularity", "auto");
  EXPECT_EQ(config.track.granularity, 0u);
  config.set("track.granularity", "64KiB");
  EXPECT_EQ(config.track.granularity, 64u * 1024);
  const Config loaded = Config::load("", {{"track.granularity", "doubling"}});
  EXPECT_EQ(loaded.track.granularity, kDoublingGranularity);
}

TEST(DoublingGranularityConfigTest, RefusedValuesNameTheKeyAndEveryChoice) {
  for (const char* bad : {"doubled", "double", "", "3KiB", "2GiB", "-4KiB"}) {
    Config config;
    const std::string message = message_of<ConfigError>([&] { config.set("track.granularity", bad); });
    EXPECT_CONTAINS(message, "configuration key 'track.granularity': '" + std::string(bad) + "'");
    EXPECT_CONTAINS(message, "\"auto\", \"doubling\" or a power-of-two number of");
    EXPECT_EQ(config.track.granularity, 0u) << "a refused value changes nothing";
  }
}

// The tracker a store opens says at debug level where the rule takes each
// region: one line when a region's block changes, none when it stays.
TEST(DoublingGranularityLogTest, EachChangeOfARegionsBlockIsADebugLine) {
  const std::size_t page = track::page_size();
  HostPages memory(8 * page);
  ASSERT_NE(memory.data(), nullptr);
  const Logger log("t", LogLevel::kDebug);
  const auto tracker = track::open_tracker(TrackMethod::kHash, log);
  tracker->watch(7, reinterpret_cast<std::byte*>(memory.data()), 8 * page);
  ::testing::internal::CaptureStderr();
  for (std::size_t block : {1, 2, 2, 4}) tracker->collect(7, block);
  const std::string logged = ::testing::internal::GetCapturedStderr();
  tracker->unwatch(7);
  const auto line = [&](std::size_t pages) {
    return "region 7: management block of " + std::to_string(pages * page) + " bytes from the next interval";
  };
  EXPECT_CONTAINS(logged, line(1));
  EXPECT_CONTAINS(logged, line(2));
  EXPECT_CONTAINS(logged, line(4));
  EXPECT_EQ(logged.find(line(2)), logged.rfind(line(2))) << "a block that stays is not logged again";
}

// ---------------------------------------------------------------- a store
// A delta store of one region of 64 pages written whole at every interval,
// tracked by a method that reports whole blocks: the block in force
// (granularity_bytes) doubles at each version until one block holds the
// region, and restart gives the newest bytes back.
class DoublingStoreTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DoublingStoreTest, VersionsRecordTheDoublingBlocks) {
  Config probe;
  probe.set("track.method", GetParam());
  try {
    track::open_tracker(probe.track.method, Logger("probe", LogLevel::kOff));
  } catch (const ConfigError&) {
    GTEST_SKIP() << "track.method = " << GetParam() << " is not available here";
  }
  const std::size_t page = track::page_size();
  constexpr std::size_t kPages = 64;
  TempDir dir;
  HostPages memory(kPages * page);
  ASSERT_NE(memory.data(), nullptr);
  const Config config = Config::load("", {{"local.path", dir.path()},
                                          {"local.keep", "0"},
                                          {"persistent.every", "0"},
                                          {"capture.mode", "delta"},
                                          {"delta.full_every", "100"},
                                          {"track.method", GetParam()},
                                          {"track.granularity", "doubling"},
                                          {"log.level", "off"}});
  std::vector<unsigned char> newest;
  {
    Store store("doubling", config);
    store.protect(0, memory.data(), kPages * page, "state");
    for (int version = 0; version <= 8; ++version) {
      std::memset(memory.data(), version + 1, kPages * page);
      store.checkpoint(version);
      store.wait(version, kL2);
    }
    newest.assign(memory.data(), memory.data() + kPages * page);
    std::vector<std::uint64_t> blocks;
    for (const VersionStats& stats : store.stats()) {
      if (stats.version >= 1) blocks.push_back(stats.granularity_bytes / page);
    }
    EXPECT_EQ(blocks, (std::vector<std::uint64_t>{1, 2, 4, 8, 16, 32, 64, 64}));
    store.close();
  }
  std::memset(memory.data(), 0, kPages * page);
  Store reopened("doubling", config);
  reopened.protect(0, memory.data(), kPages * page, "state");
  EXPECT_EQ(reopened.restart(), 8);
  EXPECT_EQ(std::memcmp(memory.data(), newest.data(), newest.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(WholeBlockMethods, DoublingStoreTest, ::testing::Values("mprotect", "hash"));

}  // namespace
}  // namespace resurgo
