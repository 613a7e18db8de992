// How messages read: the one form of a failed call on a store
// (core/errors.h), control characters escaped in errors and log lines, and
// log.level = debug saying more than info (the configuration at open, each
// version's route, evictions, restart's choice).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/log.h"
#include "clean_environment.h"
#include "core/config_checks.h"
#include "core/errors.h"
#include "error_text.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

TEST(StoreCallMessage, OneForm) {
  EXPECT_EQ(store_call_message("checkpoint", "heat", "version 5 is negative; give a version >= 0"),
            "checkpoint on store 'heat': version 5 is negative; give a version >= 0");
  EXPECT_EQ(store_call_message("open", "a\nb", "x"), "open on store 'a\\x0ab': x");
}

TEST(StoreCallMessage, ForCallGivesEveryMessageTheFormAndKeepsTheType) {
  const auto thrown_for_call = [](const Error& error) {
    return message_of<InvalidArgumentError>(
        [&] { for_call("checkpoint", "heat", [&] { rethrow_as_is(error); }); });
  };
  const std::string expected = "checkpoint on store 'heat': version 5 is negative";
  EXPECT_EQ(thrown_for_call(InvalidArgumentError("checkpoint: version 5 is negative")), expected);
  EXPECT_EQ(thrown_for_call(InvalidArgumentError("checkpoint of store 'heat': version 5 is negative")), expected);
  EXPECT_EQ(thrown_for_call(InvalidArgumentError("store 'heat': version 5 is negative")), expected);
  EXPECT_EQ(thrown_for_call(InvalidArgumentError(expected)), expected);
  EXPECT_EQ(thrown_for_call(InvalidArgumentError("version 5 is negative")), expected);
  EXPECT_EQ(message_of<NotFoundError>([] { for_call("restart", "heat", [] { throw NotFoundError("no version"); }); }),
            "restart on store 'heat': no version");
  EXPECT_EQ(for_call("latest", "heat", [] { return 7; }), 7);
}

TEST(StoreCallMessage, OpeningChecksSpeakOfTheOpen) {
  Config config;
  config.interval.policy = IntervalPolicy::kSeconds;
  EXPECT_EQ(message_of<ConfigError>([&] { check_store_config("heat", config); }),
            "open on store 'heat': interval.policy = seconds needs interval.seconds; set it (e.g. \"15min\")");
}

TEST(EscapedMessages, StoreNamesAndLabels) {
  std::string m = message_of<InvalidArgumentError>([] { Store("heat\n[fake] line", Config{}); });
  EXPECT_NE(m.find("'heat\\x0a[fake] line'"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;

  TempDir dir;
  Config config;
  config.local.path = dir.path() + "/l2";
  config.persistent.path = dir.path() + "/l4";
  Store store("labels", config);
  std::vector<double> u(8);
  m = message_of<InvalidArgumentError>([&] { store.protect(0, u.data(), 64, "u\x1b[2J"); });
  EXPECT_NE(m.find("'u\\x1b[2J'"), std::string::npos) << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
}

TEST(EscapedMessages, LogLinesCannotForgeOthers) {
  ::testing::internal::CaptureStderr();
  Logger("s", LogLevel::kInfo).info("label 'a\nresurgo[s] error: forged'");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "resurgo[s] info: label 'a\\x0aresurgo[s] error: forged'\n");
}

// The C API (and the Fortran wrapper over it) reports the C++ message
// unchanged: rsg_last_error() after a C call equals what() of the C++ one.
class SameTextTest : public CleanEnvironmentTest {
 protected:
  void SetUp() override {
    CleanEnvironmentTest::SetUp();
    ::setenv("RESURGO_LOCAL_PATH", (dir_.path() + "/l2").c_str(), 1);
    ::setenv("RESURGO_PERSISTENT_PATH", (dir_.path() + "/l4").c_str(), 1);
  }
  // rsg_last_error() of opening `name` with the C API, which fails.
  static std::string c_open_error(const char* config_path, const char* name) {
    rsg_store* store = nullptr;
    EXPECT_NE(rsg_open(config_path, name, &store), RSG_OK);
    return rsg_last_error();
  }
  template <class E>
  static std::string cpp_open_error(const std::string& config_path, const std::string& name) {
    return message_of<E>([&] { Store(name, Config::load(config_path)); });
  }
  TempDir dir_;
};

TEST_F(SameTextTest, OpenFailuresReadAlikeInCAndCpp) {
  const std::string typo = dir_.path() + "/typo.toml";
  std::ofstream(typo) << "[local]\nkep = 1\n";
  EXPECT_EQ(c_open_error(typo.c_str(), "same"), cpp_open_error<ConfigError>(typo, "same"));
  EXPECT_NE(std::string(rsg_last_error()).find("did you mean local.keep?"), std::string::npos);

  ::setenv("RESURGO_LOCAL_KEPP", "1", 1);
  EXPECT_EQ(c_open_error(nullptr, "same"), cpp_open_error<ConfigError>("", "same"));
  EXPECT_NE(std::string(rsg_last_error()).find("RESURGO_LOCAL_KEEP"), std::string::npos);
  ::unsetenv("RESURGO_LOCAL_KEPP");

  EXPECT_EQ(c_open_error(nullptr, "bad\nname"), cpp_open_error<InvalidArgumentError>("", "bad\nname"));
  EXPECT_NE(std::string(rsg_last_error()).find("'bad\\x0aname'"), std::string::npos) << rsg_last_error();
}

TEST_F(SameTextTest, CallFailuresReadAlikeInCAndCpp) {
  std::vector<double> u(16, 1.0);
  rsg_store* c_store = nullptr;
  ASSERT_EQ(rsg_open(nullptr, "c-store", &c_store), RSG_OK) << rsg_last_error();
  EXPECT_EQ(rsg_protect(c_store, 0, u.data(), 128, "u\x1b"), RSG_EINVAL);
  const std::string c_label = rsg_last_error();
  ASSERT_EQ(rsg_protect(c_store, 0, u.data(), 128, "u"), RSG_OK);
  ASSERT_EQ(rsg_checkpoint(c_store, 5), RSG_OK);
  EXPECT_EQ(rsg_checkpoint(c_store, 5), RSG_EINVAL);
  const std::string c_version = rsg_last_error();
  ASSERT_EQ(rsg_close(c_store), RSG_OK);

  ::setenv("RESURGO_LOCAL_PATH", (dir_.path() + "/cpp-l2").c_str(), 1);
  ::setenv("RESURGO_PERSISTENT_PATH", (dir_.path() + "/cpp-l4").c_str(), 1);
  Store store("c-store");
  EXPECT_EQ(message_of<InvalidArgumentError>([&] { store.protect(0, u.data(), 128, "u\x1b"); }), c_label);
  store.protect(0, u.data(), 128, "u");
  store.checkpoint(5);
  EXPECT_EQ(message_of<InvalidArgumentError>([&] { store.checkpoint(5); }), c_version);
  EXPECT_NE(c_version.find("version 5"), std::string::npos) << c_version;
}

class DebugLogTest : public CleanEnvironmentTest {
 protected:
  // What a store logs at `level` through open, three checkpoints (one
  // evicted from L2, keep 2), a restart and close.
  std::string log_of_a_run(LogLevel level) {
    Config config;
    config.local.path = dir_.path() + "/l2-" + to_string(level);
    config.persistent.path = dir_.path() + "/l4-" + to_string(level);
    config.persistent.every = 2;
    config.log.level = level;
    std::vector<double> u(1024, 1.0);
    ::testing::internal::CaptureStderr();
    {
      Store store("debug", config);
      store.protect(0, u.data(), u.size() * sizeof(double), "u");
      for (int version = 1; version <= 3; ++version) store.checkpoint(version);
      store.wait(kAllVersions, kL2);
      store.restart();
      store.close();
    }
    return ::testing::internal::GetCapturedStderr();
  }
  TempDir dir_;
};

TEST_F(DebugLogTest, DebugSaysMoreThanInfo) {
  const std::string info = log_of_a_run(LogLevel::kInfo);
  const std::string debug = log_of_a_run(LogLevel::kDebug);
  EXPECT_EQ(info.find(" debug: "), std::string::npos) << info;
  const std::string l2 = dir_.path() + "/l2-debug";
  for (const std::string& line :
       {"resurgo[debug] debug: configuration: capture copy (buffer auto); L0 off; L1 off; L2 " + l2 +
            " every 1 keep 2 mode 0600; L3 none; L4 " + dir_.path() + "/l4-debug every 2 keep 2 mode 0600; pipeline "
            "threads auto compress none chunk 4.00 MiB; interval none; trace off\n",
        std::string("resurgo[debug] debug: version 1 goes to L2\n"),
        std::string("resurgo[debug] debug: version 2 goes to L2, L4\n"),
        "resurgo[debug] debug: version 3 reached L2 " + l2 + "/debug (",
        std::string("resurgo[debug] debug: version 1 evicted from L2\n"),
        std::string("resurgo[debug] debug: restart of the newest version: version 3 read from L2 (chain 3)\n")}) {
    EXPECT_NE(debug.find(line), std::string::npos) << "no line '" << line << "' in:\n" << debug;
  }
}

}  // namespace
}  // namespace resurgo
