// The environment as a configuration layer (docs/config.md, "Environment
// variables"): which RESURGO_ variables apply, which are left alone, which
// are refused as misspelt; RESURGO_CONFIG; and what a configuration error
// says: the file, the line, the key a typo away, the value escaped.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "clean_environment.h"
#include "core/config_names.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

class ConfigEnvTest : public CleanEnvironmentTest {
 protected:
  std::string write_toml(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The ConfigError message of Config::load(`file`), or "" when it loads.
  static std::string load_error(const std::string& file = "") {
    try {
      Config::load(file);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  TempDir dir_;
};

TEST_F(ConfigEnvTest, TheProjectsOwnVariablesAndUnrelatedOnesLeaveLoadingAlone) {
  std::vector<std::string> names{"RESURGO_FOO_BAR", "RESURGO_HOME", "RESURGO_DEBUG", "RESURGO_VERSION"};
  for (const std::string_view other : kOtherVariables) {
    if (other != kConfigFileVariable) names.emplace_back(other);
  }
  for (const std::string& name : names) {
    ::setenv(name.c_str(), "1", 1);
    EXPECT_EQ(load_error(), "") << name;
    ::unsetenv(name.c_str());
  }
}

// The case: bootstrap's RESURGO_SKIP_SYSTEM_CHECK=1 still in the
// shell stopped every store from opening.
TEST_F(ConfigEnvTest, AStoreOpensBesideTheProjectsOwnVariables) {
  ::setenv("RESURGO_SKIP_SYSTEM_CHECK", "1", 1);
  ::setenv("RESURGO_BENCH_PACKAGES", "1", 1);
  ::setenv("RESURGO_LOCAL_PATH", (dir_.path() + "/l2").c_str(), 1);
  ::setenv("RESURGO_PERSISTENT_PATH", (dir_.path() + "/l4").c_str(), 1);
  std::vector<double> u(64, 1.0);
  Store store("beside");
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  store.wait(1, kL2);
  EXPECT_EQ(store.config().local.path, dir_.path() + "/l2");
}

TEST_F(ConfigEnvTest, AMisspeltConfigurationVariableIsAnErrorNamingTheNearestOne) {
  const struct {
    const char* variable;
    const char* suggestion;
  } typos[] = {{"RESURGO_LOCAL_KEPP", "did you mean RESURGO_LOCAL_KEEP?"},
               {"RESURGO_LOCL_PATH", "did you mean RESURGO_LOCAL_PATH?"},
               {"RESURGO_PERSISTENTEVERY", "did you mean RESURGO_PERSISTENT_EVERY?"},
               {"RESURGO_PIPELINE_THREAD", "did you mean RESURGO_PIPELINE_THREADS?"}};
  for (const auto& [variable, suggestion] : typos) {
    ::setenv(variable, "2", 1);
    const std::string message = load_error();
    EXPECT_EQ(message.rfind(std::string("environment variable ") + variable + ": unknown configuration key", 0), 0u)
        << message;
    EXPECT_NE(message.find(suggestion), std::string::npos) << message;
    ::unsetenv(variable);
  }
  // A section's word with no key near: still ours, still an error.
  ::setenv("RESURGO_PIPELINE_SOMETHING_ELSE", "1", 1);
  const std::string message = load_error();
  EXPECT_NE(message.find("RESURGO_PIPELINE_SOMETHING_ELSE"), std::string::npos) << message;
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
  EXPECT_NE(message.find("known keys are capture.mode, "), std::string::npos) << message;
}

// defaults < the program's file < RESURGO_CONFIG < RESURGO_<SECTION>_<KEY>
// < the program's explicit values.
TEST_F(ConfigEnvTest, ConfigVariableNamesAFileBetweenTheProgramsFileAndTheVariables) {
  const std::string program =
      write_toml("program.toml", "[local]\nkeep = 5\n[persistent]\nkeep = 6\n[pipeline]\nthreads = 1\n");
  const std::string site = write_toml("site.toml", "[local]\nkeep = 7\n[persistent]\nevery = 3\n");
  ::setenv("RESURGO_CONFIG", site.c_str(), 1);
  Config c = Config::load(program);
  EXPECT_EQ(c.local.keep, 7);
  EXPECT_EQ(c.persistent.keep, 6);
  EXPECT_EQ(c.persistent.every, 3);
  EXPECT_EQ(c.pipeline.threads, 1);
  ::setenv("RESURGO_PERSISTENT_EVERY", "4", 1);
  EXPECT_EQ(Config::load(program).persistent.every, 4);
  EXPECT_EQ(Config::load(program, {{"local.keep", "9"}}).local.keep, 9);
  EXPECT_EQ(Config::load().local.keep, 7);  // a program without a file of its own
  ::setenv("RESURGO_CONFIG", "", 1);        // empty: no file
  EXPECT_EQ(Config::load().local.keep, 2);
}

TEST_F(ConfigEnvTest, ConfigVariableErrorsNameTheVariableAndThePath) {
  const std::string missing = dir_.path() + "/missing.toml";
  ::setenv("RESURGO_CONFIG", missing.c_str(), 1);
  EXPECT_EQ(load_error(), "environment variable RESURGO_CONFIG: configuration file '" + missing +
                              "' cannot be opened for reading: No such file or directory");
  ::setenv("RESURGO_CONFIG", dir_.path().c_str(), 1);
  EXPECT_EQ(load_error(), "environment variable RESURGO_CONFIG: configuration file '" + dir_.path() +
                              "' is a directory; give the path of a TOML file");
  const std::string typo = write_toml("typo.toml", "[local]\n\nkep = 3\n");
  ::setenv("RESURGO_CONFIG", typo.c_str(), 1);
  EXPECT_EQ(load_error().rfind("environment variable RESURGO_CONFIG: configuration file '" + typo +
                                   "' line 3: unknown configuration key 'local.kep'; did you mean local.keep?",
                               0),
            0u)
      << load_error();
}

TEST_F(ConfigEnvTest, FileErrorsNameTheFileAndTheLine) {
  const std::string typo = write_toml("typo.toml", "[local]\npath = \"/x\"\nkep = 2\n");
  EXPECT_EQ(load_error(typo).rfind("configuration file '" + typo +
                                       "' line 3: unknown configuration key 'local.kep'; did you mean local.keep?",
                                   0),
            0u)
      << load_error(typo);
  const std::string value = write_toml("value.toml", "[pipeline]\n\nthreads = \"many\"\n");
  EXPECT_EQ(load_error(value), "configuration file '" + value +
                                   "' line 3: configuration key 'pipeline.threads': 'many' is not an integer in "
                                   "[0, 64]");
  const std::string array = write_toml("array.toml", "[local]\npath = [1]\n");
  EXPECT_EQ(load_error(array), "configuration file '" + array +
                                   "' line 2: configuration key 'local.path': a TOML array is not a value; give a "
                                   "string, a number or true/false");
  const std::string section = write_toml("section.toml", "[pipeline]\nthreads = 1\n[nosuch]\n");
  EXPECT_EQ(load_error(section).rfind("configuration file '" + section + "' line 3: unknown section [nosuch]", 0),
            0u)
      << load_error(section);
}

TEST_F(ConfigEnvTest, ControlCharactersInKeysValuesAndPathsAreEscaped) {
  const auto set_error = [](const std::string& key, const std::string& value) -> std::string {
    Config c;
    try {
      c.set(key, value);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  std::string m = set_error("local.ke\x1b[2Jep", "1");
  EXPECT_NE(m.find("'local.ke\\x1b[2Jep'"), std::string::npos) << m;
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  m = set_error("pipeline.threads", "4\n5");
  EXPECT_EQ(m, "configuration key 'pipeline.threads': '4\\x0a5' is not an integer in [0, 64]");
  m = set_error("pipeline.compress", "lz4\r");
  EXPECT_NE(m.find("unknown value 'lz4\\x0d'"), std::string::npos) << m;

  ::setenv("RESURGO_LOCAL_KEEP", "1\x07", 1);
  EXPECT_EQ(load_error(), "environment variable RESURGO_LOCAL_KEEP: configuration key 'local.keep': '1\\x07' is "
                          "not an integer in [0, 1048576]");
  ::unsetenv("RESURGO_LOCAL_KEEP");

  const std::string odd = write_toml("odd\nname.toml", "[local]\n\"ke\\u0007p\" = 1\n");
  m = load_error(odd);
  EXPECT_NE(m.find("configuration file '" + dir_.path() + "/odd\\x0aname.toml' line 2"), std::string::npos) << m;
  EXPECT_NE(m.find("'local.ke\\x07p'"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.find('\x07'), std::string::npos) << m;
}

}  // namespace
}  // namespace resurgo
