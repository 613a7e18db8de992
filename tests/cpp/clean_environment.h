// A fixture that runs each test without the RESURGO_* variables of the
// test run (and without TMPDIR, XDG_RUNTIME_DIR), restoring them after:
// the environment is a configuration layer, and the test sets its own.
#pragma once

#include <stdlib.h>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

extern char** environ;

class CleanEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& name : ours()) {
      saved_.emplace_back(name, ::getenv(name.c_str()));
      ::unsetenv(name.c_str());
    }
  }
  void TearDown() override {
    for (const std::string& name : ours()) ::unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static std::vector<std::string> ours() {
    std::vector<std::string> names;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string assignment(*entry);
      const std::string name = assignment.substr(0, assignment.find('='));
      if (name.rfind("RESURGO_", 0) == 0 || name == "TMPDIR" || name == "XDG_RUNTIME_DIR") names.push_back(name);
    }
    return names;
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};
