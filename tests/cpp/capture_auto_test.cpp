// capture.mode = "auto": copy or fork chosen per region from the write rate
// the tracker measured in the last interval (capture/auto_capture.h). The
// rule on given rates; a store whose write-heavy region is copied and whose
// read-mostly region is forked into one version that restarts bit for bit;
// the rule without rates where the tracker cannot measure; the key.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "../sanitized.h"
#include "base/units.h"
#include "capture/auto_capture.h"
#include "capture/huge_page_collapse.h"
#include "capture/mappings.h"
#include "huge_aligned_memory.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "version_stats.h"
#include "writer_gate.h"
#include "track/uffd_tracker.h"

namespace resurgo {
namespace {

bool fits_8MiB(std::uint64_t bytes) { return bytes <= 8 * kMiB; }

TEST(AutoRule, CopiesTheWriteHeavyRegionAndForksTheReadMostlyOne) {
  const AutoChoice choice =
      choose_per_region({{"field", 4 * kMiB, 0.9}, {"mesh", 4 * kMiB, 0.01}}, 0.25, fits_8MiB);
  EXPECT_STREQ(choice.mode, "copy+fork");
  EXPECT_EQ(choice.copied, (std::vector<bool>{true, false}));
  EXPECT_NE(choice.why.find("copies 'field' (90.0%)"), std::string::npos) << choice.why;
  EXPECT_NE(choice.why.find("forks 'mesh' (1.0%)"), std::string::npos) << choice.why;
}

TEST(AutoRule, TheThresholdItselfIsReadMostly) {
  const AutoChoice choice = choose_per_region({{"a", 4 * kMiB, 0.5}, {"b", kMiB, 0.51}}, 0.5, fits_8MiB);
  EXPECT_EQ(choice.copied, (std::vector<bool>{false, true}));
}

TEST(AutoRule, WithoutARateTheStateIsCopiedWhenItFitsAndForkedOtherwise) {
  const AutoChoice fits = choose_per_region({{"a", kMiB, 0.9}, {"b", kMiB, std::nullopt}}, 0.25, fits_8MiB);
  EXPECT_STREQ(fits.mode, "copy");
  EXPECT_EQ(fits.copied, (std::vector<bool>{true, true}));
  EXPECT_NE(fits.why.find("no write rate of region 'b'"), std::string::npos) << fits.why;
  const AutoChoice larger = choose_per_region({{"a", 16 * kMiB, std::nullopt}}, 0.25, fits_8MiB);
  EXPECT_STREQ(larger.mode, "fork");
  EXPECT_EQ(larger.copied, (std::vector<bool>{false}));
}

TEST(AutoRule, EveryRegionWriteHeavyFallsBackToTheRuleWithoutRates) {
  EXPECT_STREQ(choose_per_region({{"a", kMiB, 0.9}, {"b", kMiB, 0.8}}, 0.25, fits_8MiB).mode, "copy");
  EXPECT_STREQ(choose_per_region({{"a", 8 * kMiB, 0.9}, {"b", kMiB, 0.8}}, 0.25, fits_8MiB).mode, "fork");
}

TEST(AutoRule, EveryRegionReadMostlyIsForked) {
  const AutoChoice choice = choose_per_region({{"a", 3 * kMiB, 0.0}, {"b", kMiB, 0.1}}, 0.25, fits_8MiB);
  EXPECT_STREQ(choice.mode, "fork");
  EXPECT_EQ(choice.copied, (std::vector<bool>{false, false}));
}

// Forking less than kLeastForkedBytes costs more than copying it.
TEST(AutoRule, FewReadMostlyBytesAreCopiedWithTheRest) {
  const AutoChoice small = choose_per_region({{"a", kMiB, 0.0}, {"b", 2 * kMiB, 0.1}}, 0.25, fits_8MiB);
  EXPECT_STREQ(small.mode, "copy");
  const AutoChoice beside = choose_per_region({{"a", 4 * kMiB, 0.9}, {"b", 3 * kMiB, 0.0}}, 0.25, fits_8MiB);
  EXPECT_STREQ(beside.mode, "copy");
  EXPECT_NE(beside.why.find("hold less than a fork costs"), std::string::npos) << beside.why;
}

TEST(AutoRule, WriteHeavyRegionsLargerThanTheBufferFallBackToTheRuleWithoutRates) {
  const AutoChoice choice =
      choose_per_region({{"big", 12 * kMiB, 0.9}, {"small", 4 * kMiB, 0.0}}, 0.25, fits_8MiB);
  EXPECT_STREQ(choice.mode, "fork");
  EXPECT_NE(choice.why.find("do not fit the buffer"), std::string::npos) << choice.why;
}

TEST(AutoKey, FractionsAreAcceptedAndOtherValuesRefusedNamingTheKey) {
  EXPECT_DOUBLE_EQ(Config().capture.auto_copy_above, 0.15);
  EXPECT_DOUBLE_EQ(Config::load("", {{"capture.auto_copy_above", "0.5"}}).capture.auto_copy_above, 0.5);
  EXPECT_DOUBLE_EQ(Config::load("", {{"capture.auto_copy_above", "10%"}}).capture.auto_copy_above, 0.1);
  TempDir dir;
  const std::string toml = dir.path() + "/resurgo.toml";
  std::ofstream(toml) << "[capture]\nmode = \"auto\"\nauto_copy_above = 0.4\n";
  EXPECT_DOUBLE_EQ(Config::load(toml).capture.auto_copy_above, 0.4);
  for (const char* bad : {"0", "1.5", "-0.2", "many", ""}) {
    try {
      Config::load("", {{"capture.auto_copy_above", bad}});
      ADD_FAILURE() << "accepted capture.auto_copy_above = '" << bad << "'";
    } catch (const ConfigError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find("capture.auto_copy_above"), std::string::npos) << text;
      EXPECT_NE(text.find("is not a fraction in (0, 1]"), std::string::npos) << text;
    }
  }
}

using Memory = testing::HugeAlignedMemory;

bool uffd_available() {
  try {
    track::make_uffd_tracker();
    return true;
  } catch (const track::Unavailable&) {
    return false;
  }
}

// Whether any mapping under [data, data + bytes) is still advised MADV_DONTFORK.
bool left_out_of_forks(const std::byte* data, std::size_t bytes) {
  for (const Mapping& mapping : mappings_of_this_process()) {
    if (mapping.overlaps(data, bytes) && mapping.has_flag("dc")) return true;
  }
  return false;
}

class AutoCaptureTest : public ::testing::Test {
 protected:
  // The tests that split a version fork a writer while the store's threads
  // run, which the sanitizers' allocators do not survive (tests/sanitized.h),
  // and a sanitizer's own memory would count as the child's copy-on-write.
  static bool forks_unsupported() { return kSanitized || !uffd_available(); }
  Config config() const {
    return Config::load("", {{"local.path", dir.path() + "/l2"},
                             {"persistent.every", "0"},
                             {"capture.mode", "auto"},
                             {"log.level", "info"}});
  }

  TempDir dir;
};

// Version 2 copies `heavy` (written whole) and forks `light` (unwritten).
// While the child waits, the parent overwrites `heavy`, which the version
// must not see and which costs no copy-on-write (its memory was left out of
// the child); both regions come back bit for bit.
TEST_F(AutoCaptureTest, WriteHeavyRegionIsCopiedReadMostlyOneForkedAndTheVersionRestoresBitForBit) {
  if (forks_unsupported()) GTEST_SKIP() << "needs uffd write protection, and no sanitizer (forks a writer)";
  WriterGate gate;
  Memory heavy(32 * kMiB, false);
  Memory light(8 * kMiB, false);
  heavy.fill(1);
  light.fill(2);
  ::testing::internal::CaptureStderr();
  Store store("a", config(), gate.env());
  store.protect(0, heavy.data(), heavy.bytes(), "heavy");
  store.protect(1, light.data(), light.bytes(), "light");
  store.checkpoint(1);
  heavy.fill(3);
  const std::vector<std::byte> heavy_saved = heavy.copy();
  const std::vector<std::byte> light_saved = light.copy();
  store.checkpoint(2);
  heavy.fill(4);
  gate.open();
  const VersionStats first = stats_of(store, 1);
  const VersionStats split = stats_of(store, 2);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(first.capture, "copy");
  EXPECT_EQ(split.capture, "copy+fork");
  EXPECT_EQ(split.tracker, "uffd");
  EXPECT_GE(split.dirty_bytes, heavy.bytes());
  EXPECT_LT(split.dirty_bytes, heavy.bytes() + light.bytes() / 2);
  EXPECT_LT(split.copy_on_write_bytes, heavy.bytes() / 2) << "the child shared the copied region";
  EXPECT_NE(log.find("copies 'heavy' (100.0%)"), std::string::npos) << log;
  EXPECT_NE(log.find("forks 'light' (0.0%)"), std::string::npos) << log;
  EXPECT_FALSE(left_out_of_forks(heavy.data(), heavy.bytes())) << "MADV_DONTFORK outlived the fork";
  light.fill(5);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(heavy.equals(heavy_saved));
  EXPECT_TRUE(light.equals(light_saved));
}

// The choice is logged when it changes, not at every version.
TEST_F(AutoCaptureTest, TheChoiceIsLoggedOnceWhileItHolds) {
  if (forks_unsupported()) GTEST_SKIP() << "needs uffd write protection, and no sanitizer (forks a writer)";
  Memory heavy(4 * kMiB, false);
  Memory light(8 * kMiB, false);
  ::testing::internal::CaptureStderr();
  Store store("a", config());
  store.protect(0, heavy.data(), heavy.bytes(), "heavy");
  store.protect(1, light.data(), light.bytes(), "light");
  for (int version = 1; version <= 4; ++version) {
    heavy.fill(version);
    store.checkpoint(version);
  }
  store.wait(kAllVersions, kL2);
  const std::string log = ::testing::internal::GetCapturedStderr();
  std::size_t lines = 0;
  for (std::size_t at = log.find("copies 'heavy'"); at != std::string::npos; at = log.find("copies 'heavy'", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;
  EXPECT_EQ(stats_of(store, 4).capture, "copy+fork");
}

// A copied region is tracked again one interval in kCopiedTrackedEvery:
// once it is no longer written, it is forked with the rest.
TEST_F(AutoCaptureTest, CopiedRegionNoLongerWrittenIsForkedOnceTrackedAgain) {
  if (forks_unsupported()) GTEST_SKIP() << "needs uffd write protection, and no sanitizer (forks a writer)";
  Memory heavy(4 * kMiB, false);
  Memory light(8 * kMiB, false);
  Store store("a", config());
  store.protect(0, heavy.data(), heavy.bytes(), "heavy");
  store.protect(1, light.data(), light.bytes(), "light");
  store.checkpoint(1);
  heavy.fill(1);
  store.checkpoint(2);
  const int tracked_again = 2 + kCopiedTrackedEvery;  // its first collect after the rest
  for (int version = 3; version <= tracked_again; ++version) store.checkpoint(version);
  EXPECT_EQ(stats_of(store, 2).capture, "copy+fork");
  EXPECT_EQ(stats_of(store, tracked_again - 1).capture, "copy+fork") << "the rest keeps the last rate";
  EXPECT_EQ(stats_of(store, tracked_again).capture, "fork");
}

// Shared memory is beyond uffd's write protection: without its rate the
// state is copied (it fits the buffer) at every version, as without rates.
TEST_F(AutoCaptureTest, RegionTheTrackerCannotWatchKeepsTheRuleWithoutRates) {
  Memory heavy(4 * kMiB, true);
  Memory light(4 * kMiB, false);
  heavy.fill(1);
  light.fill(2);
  ::testing::internal::CaptureStderr();
  Store store("a", config());
  store.protect(0, heavy.data(), heavy.bytes(), "heavy");
  store.protect(1, light.data(), light.bytes(), "light");
  store.checkpoint(1);
  heavy.fill(3);
  const std::vector<std::byte> heavy_saved = heavy.copy();
  store.checkpoint(2);
  const VersionStats second = stats_of(store, 2);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(second.capture, "copy");
  EXPECT_TRUE(log.find("no write rate of region 'heavy'") != std::string::npos ||
              log.find("measures no write rate") != std::string::npos)
      << log;
  heavy.fill(4);
  EXPECT_EQ(store.restart(2), 2);
  EXPECT_TRUE(heavy.equals(heavy_saved));
}

}  // namespace
}  // namespace resurgo
