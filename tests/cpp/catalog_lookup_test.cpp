// Catalog's lookups: the newest versions are found by a walk back from the
// newest one, older ones by the tree; every answer must be the same either way.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/catalog.h"

namespace resurgo {
namespace {

VersionStats catalog_capture_with_base(int base) {
  VersionStats stats;
  stats.base_version = base;
  return stats;
}

// Even versions 0..60, each a delta on the one before it (0 is full), routed to L1 then L2.
void add_even_versions(Catalog& catalog) {
  for (int version = 0; version <= 60; version += 2) {
    catalog.add(version, Clock::now(), {1, 2}, catalog_capture_with_base(version == 0 ? -1 : version - 2));
  }
}

TEST(CatalogLookupTest, OldRecentAndMissingVersionsAreAnsweredAlike) {
  Catalog catalog("lookup");
  add_even_versions(catalog);
  for (int version = -1; version <= 62; ++version) {
    const bool added = version >= 0 && version <= 60 && version % 2 == 0;
    EXPECT_EQ(catalog.known(version), added) << "version " << version;
    EXPECT_EQ(catalog.outcome(version, 2).has_value(), added) << "version " << version;
    EXPECT_EQ(catalog.routed(version, 2), added) << "version " << version;
    EXPECT_EQ(catalog.pinned(version, 1), added) << "version " << version;
    const std::optional<int> base = added ? std::optional<int>(version == 0 ? -1 : version - 2) : std::nullopt;
    EXPECT_EQ(catalog.base_of(version, 2), base) << "version " << version;
  }
}

TEST(CatalogLookupTest, EachVersionSettlesOnlyItself) {
  Catalog catalog("lookup");
  add_even_versions(catalog);
  for (int version : {0, 30, 56, 60}) catalog.reached(version, 1, 100, 0.0);
  for (int version : {0, 30, 56, 60}) catalog.reached(version, 2, 100, 0.0);
  for (int version = 0; version <= 60; version += 2) {
    const bool reached = version == 0 || version == 30 || version == 56 || version == 60;
    EXPECT_EQ(catalog.outcome(version, 2), reached ? 1 : 0) << "version " << version;
    EXPECT_EQ(catalog.pinned(version, 1), !reached) << "version " << version;
  }
}

// A waiter holds its version's entry while newer versions are added.
TEST(CatalogLookupTest, AWaitOnAnOldVersionOutlivesNewerAdditions) {
  Catalog catalog("lookup");
  add_even_versions(catalog);
  std::thread waiter([&] { catalog.wait(4, 2); });
  for (int version = 62; version <= 200; ++version) catalog.add(version, Clock::now(), {1, 2}, catalog_capture_with_base(-1));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  catalog.reached(4, 1, 100, 0.0);
  catalog.reached(4, 2, 100, 0.0);
  waiter.join();
  EXPECT_EQ(catalog.outcome(4, 2), 1);
}

}  // namespace
}  // namespace resurgo
