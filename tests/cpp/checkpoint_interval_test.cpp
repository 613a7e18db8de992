// Store::need_checkpoint and its policies ([interval], docs/interval.md):
// the arithmetic of each policy on given durations (no clock), the keys'
// parsing, and the Store's answers at the extremes a test can reach
// without waiting.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/checkpoint_timer.h"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

Config::Interval policy(IntervalPolicy kind) {
  Config::Interval interval;
  interval.policy = kind;
  interval.seconds = 600;
  interval.max_overhead = 0.02;
  interval.mtbf = 86400;
  return interval;
}

TEST(CheckpointTimerTest, FixedSecondsIgnoreTheCost) {
  const CheckpointTimer timer(policy(IntervalPolicy::kSeconds));
  EXPECT_EQ(timer.interval(std::nullopt), 600);
  EXPECT_EQ(timer.interval(5.0), 600);
  EXPECT_FALSE(timer.due(599, 5.0));
  EXPECT_TRUE(timer.due(600, 5.0));
}

TEST(CheckpointTimerTest, OverheadKeepsTheCostAtMostTheFractionOfTheInterval) {
  const CheckpointTimer timer(policy(IntervalPolicy::kOverhead));
  EXPECT_DOUBLE_EQ(*timer.interval(0.5), 25.0);  // 0.5 s is 2 % of 25 s
  EXPECT_FALSE(timer.due(24.9, 0.5));
  EXPECT_TRUE(timer.due(25.0, 0.5));
}

TEST(CheckpointTimerTest, YoungDalyIsTheSquareRootOfTwiceCostTimesMtbf) {
  const CheckpointTimer timer(policy(IntervalPolicy::kYoungDaly));
  EXPECT_DOUBLE_EQ(*timer.interval(2.0), std::sqrt(2.0 * 2.0 * 86400));  // about 588 s
  EXPECT_FALSE(timer.due(500, 2.0));
  EXPECT_TRUE(timer.due(600, 2.0));
}

TEST(CheckpointTimerTest, ACostBasedPolicyWithoutACostAsksForTheFirstCheckpoint) {
  for (IntervalPolicy kind : {IntervalPolicy::kOverhead, IntervalPolicy::kYoungDaly}) {
    const CheckpointTimer timer(policy(kind));
    EXPECT_FALSE(timer.interval(std::nullopt).has_value());
    EXPECT_TRUE(timer.due(0, std::nullopt));
  }
}

TEST(CheckpointIntervalConfigTest, KeysParseDurationsFractionsAndPolicies) {
  TempDir dir;
  const Config config = Config::load("", {{"interval.policy", "young-daly"},
                                          {"interval.mtbf", "2d"},
                                          {"interval.seconds", "15min"},
                                          {"interval.max_overhead", "5%"}});
  EXPECT_EQ(config.interval.policy, IntervalPolicy::kYoungDaly);
  EXPECT_EQ(config.interval.mtbf, 2 * 86400);
  EXPECT_EQ(config.interval.seconds, 900);
  EXPECT_DOUBLE_EQ(config.interval.max_overhead, 0.05);
  EXPECT_THROW(Config::load("", {{"interval.policy", "often"}}), ConfigError);
  const std::string toml = dir.path() + "/interval.toml";
  std::ofstream(toml) << "[interval]\npolicy = \"overhead\"\nmax_overhead = 0.02\nmtbf = 3600.5\n";
  const Config from_file = Config::load(toml);
  EXPECT_DOUBLE_EQ(from_file.interval.max_overhead, 0.02);
  EXPECT_DOUBLE_EQ(from_file.interval.mtbf, 3600.5);
  EXPECT_THROW(Config::load("", {{"interval.seconds", "-3"}}), ConfigError);
  EXPECT_THROW(Config::load("", {{"interval.seconds", "3 weeks"}}), ConfigError);
  EXPECT_THROW(Config::load("", {{"interval.max_overhead", "1.5"}}), ConfigError);
}

class NeedCheckpointTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> keys) {
    keys["local.path"] = dir.path() + "/l2";
    keys["persistent.every"] = "0";
    keys["log.level"] = "off";
    return Config::load("", keys);
  }
  TempDir dir;
  std::vector<double> u = std::vector<double>(4096, 1.0);
};

TEST_F(NeedCheckpointTest, WithoutAPolicyTheQuestionIsAnError) {
  Store store("s", config({}));
  try {
    store.need_checkpoint();
    FAIL() << "need_checkpoint answered without a policy";
  } catch (const StateError& error) {
    EXPECT_NE(std::string(error.what()).find("interval.policy"), std::string::npos) << error.what();
  }
  EXPECT_THROW(Store("s", config({{"interval.policy", "seconds"}})), ConfigError);  // no interval.seconds
}

TEST_F(NeedCheckpointTest, ALongFixedIntervalIsNotDueRightAfterOpen) {
  Store store("s", config({{"interval.policy", "seconds"}, {"interval.seconds", "1h"}}));
  EXPECT_FALSE(store.need_checkpoint());
  EXPECT_EQ(store.checkpoint_interval(), 3600);
}

TEST_F(NeedCheckpointTest, YoungDalyMeasuresTheCostAtTheFirstCheckpoint) {
  // An MTBF of a microsecond makes the interval far shorter than any step.
  Store store("s", config({{"interval.policy", "young-daly"}, {"interval.mtbf", "0.000001"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_TRUE(store.need_checkpoint());
  EXPECT_FALSE(store.checkpoint_interval().has_value());
  store.checkpoint(1);
  ASSERT_TRUE(store.checkpoint_interval().has_value());
  const double cost = store.stats().back().blocking_seconds;
  EXPECT_NEAR(*store.checkpoint_interval(), std::sqrt(2.0 * cost * 1e-6), 1e-12);
}

TEST_F(NeedCheckpointTest, OverheadWithAHugeMtbfLikeIntervalIsNotDueAfterACheckpoint) {
  Store store("s", config({{"interval.policy", "overhead"}, {"interval.max_overhead", "1e-9"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  EXPECT_FALSE(store.need_checkpoint());  // cost / 1e-9: far beyond this test's life
}

TEST_F(NeedCheckpointTest, CApiAnswersAndReportsAMissingPolicy) {
  setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
  setenv("RESURGO_PERSISTENT_EVERY", "0", 1);
  setenv("RESURGO_LOG_LEVEL", "off", 1);
  rsg_store* store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  int need = -1;
  EXPECT_EQ(rsg_need_checkpoint(store, &need), RSG_ESTATE);
  EXPECT_EQ(rsg_need_checkpoint(store, nullptr), RSG_EINVAL);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  setenv("RESURGO_INTERVAL_POLICY", "seconds", 1);
  setenv("RESURGO_INTERVAL_SECONDS", "1h", 1);
  ASSERT_EQ(rsg_open(nullptr, "c", &store), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_need_checkpoint(store, &need), RSG_OK);
  EXPECT_EQ(need, 0);
  EXPECT_EQ(rsg_close(store), RSG_OK);
  for (const char* name : {"RESURGO_LOCAL_PATH", "RESURGO_PERSISTENT_EVERY", "RESURGO_LOG_LEVEL",
                           "RESURGO_INTERVAL_POLICY", "RESURGO_INTERVAL_SECONDS"}) {
    unsetenv(name);
  }
}

}  // namespace
}  // namespace resurgo
