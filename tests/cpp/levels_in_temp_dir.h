// A fixture whose stores, opened with the default configuration (the C
// API's rsg_open with no file), keep their L2 and L4 levels in a fresh
// directory: RESURGO_LOCAL_PATH and RESURGO_PERSISTENT_PATH point there for
// the test's duration.
#pragma once

#include <stdlib.h>

#include <gtest/gtest.h>

#include "test_util.h"

class LevelsInTempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("RESURGO_LOCAL_PATH", (dir.path() + "/l2").c_str(), 1);
    setenv("RESURGO_PERSISTENT_PATH", (dir.path() + "/l4").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("RESURGO_LOCAL_PATH");
    unsetenv("RESURGO_PERSISTENT_PATH");
  }
  TempDir dir;
};
