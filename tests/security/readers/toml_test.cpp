// TOML nested beyond kMaxTomlDepth, refused before toml++ builds it: a
// 50,000-level table header killed the process inside toml++.
#include <gtest/gtest.h>

#include <chrono>

#include "core/toml_depth.h"
#include "hostile_files.h"
#include "refusal.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"
#include "test_util.h"

namespace resurgo::security {
namespace {

std::string repeated(const std::string& part, int times, const std::string& separator = "") {
  std::string text;
  for (int i = 0; i < times; ++i) text += (i > 0 ? separator : "") + part;
  return text;
}

// The message of check_toml_depth for `text`, "" when it accepts it.
std::string depth_error(const std::string& text) {
  try {
    check_toml_depth(text, "test.toml");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

TEST(HostileToml, A50000LevelHeaderIsRefusedBeforeToml) {
  TempDir dir;
  const std::string path = dir.path() + "/deep.toml";
  write_file(path, as_bytes("# a header of 50,000 levels\n" + deep_toml_header(50'000)));
  const auto start = std::chrono::steady_clock::now();
  expect_mentions(refusal<ConfigError>([&] { Config::load(path); }),
                  {"configuration file '" + path + "' line 2", "nest deeper than 32 levels"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

// Each construct at the limit is accepted, one level more refused, on the
// line where it goes too deep.
TEST(HostileToml, HeadersDottedKeysArraysAndInlineTablesEachCountALevel) {
  const struct {
    const char* name;
    std::string at_limit;
    std::string beyond;
  } cases[] = {
      {"table header", deep_toml_header(32), deep_toml_header(33)},
      {"array of tables", "[[" + repeated("a", 31, ".") + "]]\n", "[[" + repeated("a", 32, ".") + "]]\n"},
      {"dotted key under a header", "[s]\n" + repeated("k", 31, ".") + " = 1\n",
       "[s]\n" + repeated("k", 32, ".") + " = 1\n"},
      {"spaced and quoted parts", "[ a . \"b\" . 'c' ]\n" + repeated("k", 29, " . ") + " = 1\n",
       "[ a . \"b\" . 'c' ]\n" + repeated("k", 30, " . ") + " = 1\n"},
      {"arrays", "x = " + repeated("[", 31) + "1" + repeated("]", 31) + "\n",
       "x = " + repeated("[", 32) + "1" + repeated("]", 32) + "\n"},
      {"arrays over lines", "x = [\n  # comment ]\n" + repeated("[", 30) + "1" + repeated("]", 31) + "\n",
       "x = [\n  # comment ]\n" + repeated("[", 31) + "1" + repeated("]", 32) + "\n"},
      {"inline tables", "x = " + repeated("{ a = ", 31) + "1" + repeated(" }", 31) + "\n",
       "x = " + repeated("{ a = ", 32) + "1" + repeated(" }", 32) + "\n"},
      {"inline dotted keys", "x = { " + repeated("a", 31, ".") + " = 1 }\n",
       "x = { " + repeated("a", 32, ".") + " = 1 }\n"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string before = "k = 'v' # [a.a.a]\n";
    EXPECT_EQ(depth_error(before + c.at_limit), "");
    expect_mentions(depth_error(before + c.beyond), {"'test.toml' line", "deeper than 32"});
  }
  expect_mentions(depth_error("[a]\n\n" + repeated("k", 40, ".") + " = 1\n"), {"line 3"});
  expect_mentions(depth_error("\xEF\xBB\xBF" + deep_toml_header(33)), {"line 1"});  // after a byte order mark
}

// Brackets and dots inside strings and comments nest nothing.
TEST(HostileToml, StringsAndCommentsDoNotCount) {
  const std::string deep = deep_toml_header(100);
  const std::string texts[] = {
      "# " + deep,
      "[s]\nk = \"" + deep.substr(0, deep.size() - 1) + "\" # " + deep,
      "[s]\nk = '''\n" + deep + "'''\n",
      "[s]\nk = \"\"\"\n" + deep + "a \\\" b \"\"\"\n",
      "[s]\nk = 'C:\\'\nj = \"" + deep.substr(0, deep.size() - 1) + "\"\n",
      "[\"" + repeated("a", 100, ".") + "\"]\n",
      "[s]\nk = [\"[[[[\", '{{{{', \"\"\"]]]\"\"\"]\n",
  };
  for (const std::string& text : texts) EXPECT_EQ(depth_error(text), "") << text.substr(0, 120);
}

}  // namespace
}  // namespace resurgo::security
