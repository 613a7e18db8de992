// Restarts repeated in one process (the adjoint's backward pass, issue 27):
// only the first one applies the levels' keep (what earlier runs left);
// the checkpoints in between still evict, and every restart restores its
// version byte for byte, from memory or from disk.
#include <gtest/gtest.h>

#include <vector>

#include "resurgo/resurgo.hpp"
#include "test_util.h"
#include "version_pattern.h"

namespace resurgo {
namespace {

class RepeatedRestartTest : public ::testing::Test {
 protected:
  Config config(const std::string& memory_every) {
    return Config::load("", {{"memory.every", memory_every},
                             {"memory.keep", "2"},
                             {"local.every", "1"},
                             {"local.keep", "2"},
                             {"local.path", dir.path() + "/l2"},
                             {"persistent.every", "0"},
                             {"log.level", "off"}});
  }
  void fill(int version) { fill_version_pattern(u, version); }
  bool holds_state_of(int version) const { return has_version_pattern(u, version); }
  std::vector<int> held_at(Store& store, int level) {
    std::vector<int> held;
    for (const VersionInfo& info : store.versions()) {
      for (int at : info.levels) {
        if (at == level) held.push_back(info.version);
      }
    }
    return held;
  }

  TempDir dir;
  std::vector<double> u = std::vector<double>(8192);
};

TEST_F(RepeatedRestartTest, EveryRestartRestoresItsVersionAndKeepStillHolds) {
  Store store("s", config("1"));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  for (int version = 1; version <= 3; ++version) {
    fill(version);
    store.checkpoint(version);
  }
  store.wait(kAllVersions, kL2);
  for (int round = 0; round < 3; ++round) {
    fill(0);
    EXPECT_EQ(store.restart(3 - round % 2), 3 - round % 2);
    EXPECT_TRUE(holds_state_of(3 - round % 2));
  }
  for (int version = 4; version <= 6; ++version) {
    fill(version);
    store.checkpoint(version);
  }
  store.wait(kAllVersions, kL2);
  fill(0);
  EXPECT_EQ(store.restart(6), 6);
  EXPECT_TRUE(holds_state_of(6));
  store.close();
  Store reopened("s", config("0"));
  reopened.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_EQ(reopened.restart(), 6);
  EXPECT_EQ(held_at(reopened, kL2), (std::vector<int>{5, 6}));
}

}  // namespace
}  // namespace resurgo
