// Two ranks of one store (processes sharing its directories, as an MPI
// job's ranks do without a communicator) that each drew an identity at
// open, because none was written yet, must end with one. Checking the
// other directory before writing one's own still let a rank write L4 while
// another wrote L2 (the TSan and the ASan stress campaigns, once each:
// docs/reliability.md), so where L2 takes checkpoints a drawn identity is
// settled there first, whose identity file is written only if absent: a
// rank that found L4 at open writes nothing into it until L2 holds one.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "base/log.h"
#include "format/store_id.h"
#include "resurgo/config.hpp"
#include "resurgo/env.hpp"
#include "test_util.h"
#include "tier/route.h"

namespace resurgo {
namespace {

format::StoreId drawn_identity(char digit) { return *format::StoreId::parse(std::string(32, digit)); }

TEST(RouteIdentityRaceTest, ARankThatFoundL4AtOpenTakesTheIdentityL2Settles) {
  const TempDir dir;
  const Config config = Config::load(
      "", {{"local.path", dir.path() + "/l2"}, {"persistent.path", dir.path() + "/l4"}, {"persistent.every", "1"}});
  const Logger log("s", LogLevel::kError);
  Route late_to_write("s", 0, 0, config, Env::posix(), log);  // nothing there: prepares nothing yet
  late_to_write.set_identity(drawn_identity('a'), true);
  std::filesystem::create_directories(dir.path() + "/l4/s");
  Route found_l4("s", 1, 0, config, Env::posix(), log);  // finds L4: prepares it at open
  found_l4.set_identity(drawn_identity('b'), true);
  EXPECT_EQ(found_l4.persistent().identity(), std::nullopt) << "a drawn identity was written into L4 before L2";

  late_to_write.levels_for(1);  // makes L2, then L4
  EXPECT_EQ(late_to_write.local().identity(), drawn_identity('a'));
  EXPECT_EQ(late_to_write.persistent().identity(), drawn_identity('a'));

  found_l4.levels_for(1);  // L2 holds one: taken, then L4 agrees
  EXPECT_EQ(found_l4.identity(), drawn_identity('a'));
  EXPECT_NO_THROW(found_l4.persist_target(kL4));
  EXPECT_NO_THROW(late_to_write.persist_target(kL4));
}

// The rank that writes first may be the one that found L4: it settles its
// drawn identity in L2 at its first checkpoint, and the other takes it.
TEST(RouteIdentityRaceTest, TheRankThatFoundL4MaySettleTheIdentityFirst) {
  const TempDir dir;
  const Config config = Config::load(
      "", {{"local.path", dir.path() + "/l2"}, {"persistent.path", dir.path() + "/l4"}, {"persistent.every", "1"}});
  const Logger log("s", LogLevel::kError);
  Route other("s", 0, 0, config, Env::posix(), log);
  other.set_identity(drawn_identity('a'), true);
  std::filesystem::create_directories(dir.path() + "/l4/s");
  Route found_l4("s", 1, 0, config, Env::posix(), log);
  found_l4.set_identity(drawn_identity('b'), true);

  found_l4.levels_for(1);
  EXPECT_EQ(found_l4.local().identity(), drawn_identity('b'));
  EXPECT_EQ(found_l4.persistent().identity(), drawn_identity('b'));
  other.levels_for(1);
  EXPECT_EQ(other.identity(), drawn_identity('b'));
  EXPECT_NO_THROW(other.persist_target(kL4));
}

// A version that goes to L4 alone while L2 was never prepared (here
// local.every = 2 and the first version's number is odd) finds L4's
// identity written first: a version carries the identity, and one in L4
// without it would be another store's at the next open.
TEST(RouteIdentityRaceTest, TheWaitingIdentityIsWrittenBeforeAVersionGoesToL4Alone) {
  const TempDir dir;
  const Config config = Config::load("", {{"local.path", dir.path() + "/l2"},
                                          {"local.every", "2"},
                                          {"persistent.path", dir.path() + "/l4"},
                                          {"persistent.every", "1"}});
  const Logger log("s", LogLevel::kError);
  std::filesystem::create_directories(dir.path() + "/l4/s");
  Route found_l4("s", 0, 0, config, Env::posix(), log);
  found_l4.set_identity(drawn_identity('b'), true);
  EXPECT_EQ(found_l4.persistent().identity(), std::nullopt);
  const std::vector<Level*> levels = found_l4.levels_for(1);
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_EQ(levels.front(), &found_l4.persistent());
  EXPECT_EQ(found_l4.persistent().identity(), drawn_identity('b'));
}

}  // namespace
}  // namespace resurgo
