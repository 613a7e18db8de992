// Two ranks of one store (processes sharing its directories, as an MPI
// job's ranks do without a communicator) that each drew an identity at
// open, because none was written yet, must end with one: a rank that found
// L4 at open writes its identity there first, while the other makes L2
// first at its first checkpoint. The second one takes the identity already
// in L4 instead of writing its own into L2 (the TSan stress campaign once
// ended with two: docs/reliability.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "base/log.h"
#include "format/store_id.h"
#include "resurgo/config.hpp"
#include "resurgo/env.hpp"
#include "test_util.h"
#include "tier/route.h"

namespace resurgo {
namespace {

format::StoreId drawn_identity(char digit) { return *format::StoreId::parse(std::string(32, digit)); }

TEST(RouteIdentityRaceTest, ADrawnIdentityTakesTheOneAnotherRankWroteIntoAnotherDirectory) {
  const TempDir dir;
  const Config config = Config::load(
      "", {{"local.path", dir.path() + "/l2"}, {"persistent.path", dir.path() + "/l4"}, {"persistent.every", "1"}});
  const Logger log("s", LogLevel::kError);
  Route late_to_write("s", 0, 0, config, Env::posix(), log);  // nothing there: prepares nothing yet
  late_to_write.set_identity(drawn_identity('a'), true);
  std::filesystem::create_directories(dir.path() + "/l4/s");
  Route first_to_write("s", 1, 0, config, Env::posix(), log);  // finds L4: prepares it at open
  first_to_write.set_identity(drawn_identity('b'), true);
  ASSERT_EQ(first_to_write.persistent().identity(), drawn_identity('b'));

  late_to_write.levels_for(1);  // makes L2, then L4
  EXPECT_EQ(late_to_write.identity(), drawn_identity('b'));
  EXPECT_EQ(late_to_write.local().identity(), drawn_identity('b'));
  EXPECT_NO_THROW(late_to_write.persist_target(kL4));  // L4's identity is this store's
}

}  // namespace
}  // namespace resurgo
