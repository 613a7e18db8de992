// Pacer (pipeline/pacer.h): background work paced to a share of the wall
// time, on a clock the test drives (no timing in the test).
#include "pipeline/pacer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <utility>
#include <vector>

#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {
namespace {

using std::chrono::milliseconds;

struct FakeTime {
  Pacer pacer(double share, Pacer::Hurried hurried = {}) {
    return Pacer(
        share, std::move(hurried), [this] { return now; },
        [this](Clock::duration pause) {
          pauses.push_back(pause);
          now += pause;
        });
  }
  void work(milliseconds took) { now += took; }

  Clock::time_point now{};
  std::vector<Clock::duration> pauses;
};

TEST(PacerTest, AtAShareOfAQuarterEachStepIsFollowedByThreeTimesItsWork) {
  FakeTime time;
  Pacer pacer = time.pacer(0.25);
  pacer.before_step();  // nothing done yet: no pause
  time.work(milliseconds(10));
  pacer.before_step();
  time.work(milliseconds(4));
  pacer.before_step();
  ASSERT_EQ(time.pauses.size(), 2u);
  EXPECT_EQ(time.pauses[0], milliseconds(30));
  EXPECT_EQ(time.pauses[1], milliseconds(12)) << "the pause counts the work since the last pause ended";
}

TEST(PacerTest, AShareOfOneNeverPauses) {
  FakeTime time;
  Pacer pacer = time.pacer(1.0);
  for (int step = 0; step < 5; ++step) {
    pacer.before_step();
    time.work(milliseconds(10));
  }
  EXPECT_TRUE(time.pauses.empty());
}

// Once something waits for the work (a store's close, a restart of the
// newest version), the rest runs without pauses.
TEST(PacerTest, AHurriedStepDoesNotPause) {
  FakeTime time;
  bool waited_for = false;
  Pacer pacer = time.pacer(0.25, [&] { return waited_for; });
  pacer.before_step();
  time.work(milliseconds(10));
  pacer.before_step();
  waited_for = true;
  time.work(milliseconds(10));
  pacer.before_step();
  ASSERT_EQ(time.pauses.size(), 1u);
  EXPECT_EQ(time.pauses[0], milliseconds(30));
}

TEST(PacerTest, TheConfigurationRefusesAShareOutsideZeroToOne) {
  EXPECT_DOUBLE_EQ(Config::load("", {{"delta.compact_share", "25%"}}).delta.compact_share, 0.25);
  EXPECT_DOUBLE_EQ(Config().delta.compact_share, 0.25);
  for (const char* bad : {"0", "1.5", "-0.1", "half"}) {
    EXPECT_THROW(Config::load("", {{"delta.compact_share", bad}}), ConfigError) << bad;
  }
}

}  // namespace
}  // namespace resurgo
