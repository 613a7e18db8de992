// Configuration: defaults, TOML file, environment, overrides, and the error
// messages for every kind of bad input; validation of store names and labels.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cstddef>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/names.h"
#include "core/config_names.h"
#include "error_text.h"
#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "track/tracker_choice.h"

extern char** environ;

namespace resurgo {
namespace {

namespace fs = std::filesystem;

// Clears every RESURGO_* variable (and TMPDIR) for the test and restores
// them afterwards, so that the environment of the test run cannot leak in.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string assignment(*entry);
      const auto equals = assignment.find('=');
      if (equals == std::string::npos) continue;
      const std::string name = assignment.substr(0, equals);
      if (name.rfind("RESURGO_", 0) == 0 || name == "TMPDIR" || name == "XDG_RUNTIME_DIR") saved_.emplace_back(name, assignment.substr(equals + 1));
    }
    for (const auto& [name, value] : saved_) ::unsetenv(name.c_str());
  }
  void TearDown() override {
    std::vector<std::string> ours;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string assignment(*entry);
      if (assignment.rfind("RESURGO_", 0) == 0 || assignment.rfind("TMPDIR=", 0) == 0 ||
          assignment.rfind("XDG_RUNTIME_DIR=", 0) == 0) {
        ours.push_back(assignment.substr(0, assignment.find('=')));
      }
    }
    for (const std::string& name : ours) ::unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  std::string write_toml(const std::string& text) {
    const std::string path = dir_.path() + "/resurgo" + std::to_string(files_++) + ".toml";
    std::ofstream(path) << text;
    return path;
  }
  // The ConfigError message of loading `toml`, or "" when it loads.
  std::string load_error(const std::string& toml) {
    const std::string path = write_toml(toml);
    try {
      Config::load(path);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }
  std::string set_error(const std::string& key, const std::string& value) {
    Config config;
    try {
      config.set(key, value);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  TempDir dir_;
  int files_ = 0;
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(ConfigTest, CaptureModeFromEveryLayer) {
  EXPECT_EQ(Config::load("", {{"capture.mode", "fork"}}).capture.mode, CaptureMode::kFork);
  EXPECT_EQ(Config::load("", {{"capture.mode", "auto"}}).capture.mode, CaptureMode::kAuto);
  try {
    Config::load("", {{"capture.mode", "delta-ish"}});
    FAIL() << "an unknown capture mode was accepted";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("capture.mode"), std::string::npos) << error.what();
  }
}

TEST_F(ConfigTest, DefaultsWithoutFileOrEnvironment) {
  const Config c = Config::load();
  EXPECT_EQ(c.buffer.capacity, 0u);
  EXPECT_EQ(c.local.path, "");
  EXPECT_EQ(c.local.keep, 2);
  EXPECT_EQ(c.local.mode, 0600u);
  EXPECT_EQ(c.persistent.path, "checkpoints");
  EXPECT_EQ(c.persistent.keep, 2);
  EXPECT_EQ(c.persistent.every, 10);
  EXPECT_EQ(c.persistent.mode, 0600u);
  EXPECT_EQ(c.local.every, 1);
  EXPECT_EQ(c.capture.mode, CaptureMode::kCopy);
  EXPECT_EQ(c.pipeline.threads, 0);
  EXPECT_EQ(c.pipeline.compress, Codec::kNone);
  EXPECT_EQ(c.pipeline.compress_level, 1);
  EXPECT_EQ(c.pipeline.shuffle, Shuffle::kByte);
  EXPECT_EQ(c.pipeline.chunk_size, 4u << 20);
  EXPECT_EQ(c.log.level, LogLevel::kWarn);
  EXPECT_EQ(c.trace.path, "");
}

TEST_F(ConfigTest, DefaultLocalPathIsPerUserAndPerWorkingDirectory) {
  const std::string uid = std::to_string(::geteuid());
  const std::string path = Config::default_local_path();
  const std::string leaf = fs::current_path().filename().string();
  EXPECT_EQ(path.rfind("/tmp/resurgo-" + uid + "/", 0), 0u) << path;
  EXPECT_NE(path.find(leaf.substr(0, 32) + "-"), std::string::npos) << path;
  ::setenv("XDG_RUNTIME_DIR", ("/run/user/" + uid).c_str(), 1);
  EXPECT_EQ(Config::default_local_path().rfind("/run/user/" + uid + "/resurgo/", 0), 0u);
  ::setenv("TMPDIR", "/scratch/job", 1);  // a batch job's scratch wins
  EXPECT_EQ(Config::default_local_path().rfind("/scratch/job/resurgo-" + uid + "/", 0), 0u);
  ::setenv("TMPDIR", "", 1);
  ::unsetenv("XDG_RUNTIME_DIR");
  EXPECT_EQ(Config::default_local_path(), path);
  // Another working directory, another L2 (as ./checkpoints is another L4).
  TempDir other;
  const fs::path here = fs::current_path();
  fs::current_path(other.path());
  const std::string elsewhere = Config::default_local_path();
  fs::current_path(here);
  EXPECT_NE(elsewhere, path);
  EXPECT_EQ(elsewhere.rfind("/tmp/resurgo-" + uid + "/", 0), 0u) << elsewhere;
}

TEST_F(ConfigTest, FileWithEveryKey) {
  const Config c = Config::load(write_toml(R"(
# every key of docs/config.md
[buffer]
capacity = "512MiB"

[local]
path = "/dev/shm/resurgo"
keep = 3
mode = "0640"
durable = false

[persistent]
path = "/lustre/run/ckpt"
keep = 0
every = 10
mode = "0o644"
shared_group = true

[pipeline]
threads = 4
compress = "zstd"
compress_level = 7
chunk_size = 1048576

[log]
level = "debug"

[trace]
path = "/tmp/trace.json"

[restart]
accept_foreign = "yes"
)"));
  EXPECT_EQ(c.buffer.capacity, 512ull << 20);
  EXPECT_EQ(c.local.path, "/dev/shm/resurgo");
  EXPECT_EQ(c.local.keep, 3);
  EXPECT_EQ(c.local.mode, 0640u);
  EXPECT_EQ(c.persistent.path, "/lustre/run/ckpt");
  EXPECT_EQ(c.persistent.keep, 0);
  EXPECT_EQ(c.persistent.every, 10);
  EXPECT_EQ(c.persistent.mode, 0644u);
  EXPECT_TRUE(c.persistent.shared_group);
  EXPECT_FALSE(c.local.shared_group);
  EXPECT_FALSE(c.local.durable);
  EXPECT_TRUE(Config{}.local.durable);
  EXPECT_TRUE(c.restart.accept_foreign);
  EXPECT_EQ(c.pipeline.threads, 4);
  EXPECT_EQ(c.pipeline.compress, Codec::kZstd);
  EXPECT_EQ(c.pipeline.compress_level, 7);
  EXPECT_EQ(c.pipeline.chunk_size, 1u << 20);
  EXPECT_EQ(c.log.level, LogLevel::kDebug);
  EXPECT_EQ(c.trace.path, "/tmp/trace.json");
}

TEST_F(ConfigTest, SizesWithUnitsInFile) {
  Config c = Config::load(write_toml("[buffer]\ncapacity = \"1.5GB\"\n[pipeline]\nchunk_size = \"64KiB\"\n"));
  EXPECT_EQ(c.buffer.capacity, 1'500'000'000u);
  EXPECT_EQ(c.pipeline.chunk_size, 64u << 10);
  c = Config::load(write_toml("[buffer]\ncapacity = 3000000\n[pipeline]\nchunk_size = \"1 GiB\"\n"));
  EXPECT_EQ(c.buffer.capacity, 3'000'000u);
  EXPECT_EQ(c.pipeline.chunk_size, 1u << 30);
  c = Config::load(write_toml("[buffer]\ncapacity = \"auto\"\n"));
  EXPECT_EQ(c.buffer.capacity, 0u);
  c = Config::load(write_toml("[buffer]\ncapacity = 2048.0\n"));  // an integral float
  EXPECT_EQ(c.buffer.capacity, 2048u);
}

TEST_F(ConfigTest, UnknownSectionOrKeyNamesIt) {
  EXPECT_CONTAINS(load_error("[bufer]\ncapacity = \"1GiB\"\n"), "bufer.capacity");
  EXPECT_CONTAINS(load_error("[local]\npaht = \"/x\"\n"), "local.paht");
  EXPECT_CONTAINS(load_error("[pipeline]\ncompression = \"lz4\"\n"), "pipeline.compression");
  EXPECT_CONTAINS(load_error("keep = 3\n"), "keep");  // keys belong in sections
  Config c;
  try {
    c.set("local.colour", "blue");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "local.colour");
    EXPECT_CONTAINS(e.what(), "local.path");  // lists the known keys
  }
  EXPECT_THROW(Config::load("", {{"nosuch.key", "1"}}), ConfigError);
}

TEST_F(ConfigTest, UnknownKeySuggestsTheNearestKnownKey) {
  EXPECT_CONTAINS(set_error("local.kep", "1"), "did you mean local.keep?");
  EXPECT_CONTAINS(set_error("pipeline.compression", "lz4"), "did you mean pipeline.compress?");
  EXPECT_CONTAINS(load_error("[bufer]\ncapacity = \"1GiB\"\n"), "did you mean buffer.capacity?");
  const std::string far = set_error("local.colour", "blue");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  EXPECT_CONTAINS(far, "known keys are capture.mode, ");
}

TEST_F(ConfigTest, UnreadableOrMalformedFile) {
  const std::string missing = dir_.path() + "/missing.toml";
  try {
    Config::load(missing);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), missing);
  }
  const std::string message = load_error("[local]\npath = \"unterminated\n");
  EXPECT_CONTAINS(message, "line 2");
  EXPECT_CONTAINS(message, ".toml");
}

TEST_F(ConfigTest, BadValuesNameTheKeyAndWhatIsAllowed) {
  std::string m = set_error("buffer.capacity", "12 apples");
  EXPECT_CONTAINS(m, "buffer.capacity");
  EXPECT_CONTAINS(m, "MiB");
  m = set_error("local.keep", "-1");
  EXPECT_CONTAINS(m, "local.keep");
  EXPECT_CONTAINS(m, "-1");
  EXPECT_CONTAINS(set_error("persistent.keep", "two"), "persistent.keep");
  EXPECT_CONTAINS(set_error("persistent.every", "-3"), "persistent.every");
  m = set_error("pipeline.threads", "1000");
  EXPECT_CONTAINS(m, "pipeline.threads");
  EXPECT_CONTAINS(m, "64");
  EXPECT_CONTAINS(set_error("pipeline.threads", "2.5"), "pipeline.threads");
  EXPECT_CONTAINS(set_error("pipeline.threads", ""), "pipeline.threads");
  m = set_error("pipeline.compress", "gzip");
  EXPECT_CONTAINS(m, "pipeline.compress");
  EXPECT_CONTAINS(m, "gzip");
  EXPECT_CONTAINS(m, "none");
  EXPECT_CONTAINS(m, "lz4");
  EXPECT_CONTAINS(m, "zstd");
  EXPECT_CONTAINS(set_error("pipeline.compress_level", "0"), "pipeline.compress_level");
  EXPECT_CONTAINS(set_error("pipeline.compress_level", "20"), "pipeline.compress_level");
  m = set_error("log.level", "verbose");
  EXPECT_CONTAINS(m, "log.level");
  EXPECT_CONTAINS(m, "debug");
  for (const char* mode : {"0400", "0200", "0000", "8888", "rw-r--r--", "07777", "1600", ""}) {
    m = set_error("local.mode", mode);
    EXPECT_CONTAINS(m, "local.mode");
    EXPECT_CONTAINS(m, "owner");
  }
  // Files others could write, or execute: refused, not made.
  for (const char* mode : {"0777", "0660", "0602", "0700", "0610", "0601"}) {
    m = set_error("local.mode", mode);
    EXPECT_CONTAINS(m, "local.mode");
    EXPECT_CONTAINS(m, "0600");
  }
  EXPECT_CONTAINS(set_error("persistent.mode", "0400"), "persistent.mode");
}

TEST_F(ConfigTest, ValuesAreTrimmedAndCaseInsensitive) {
  Config c;
  c.set("pipeline.compress", " LZ4 ");
  EXPECT_EQ(c.pipeline.compress, Codec::kLz4);
  c.set("log.level", "Off");
  EXPECT_EQ(c.log.level, LogLevel::kOff);
  c.set("pipeline.threads", " 3 ");
  EXPECT_EQ(c.pipeline.threads, 3);
  c.set("local.mode", "600");
  EXPECT_EQ(c.local.mode, 0600u);
  c.set("local.mode", "0O644");
  EXPECT_EQ(c.local.mode, 0644u);
  c.set("buffer.capacity", "AUTO");
  EXPECT_EQ(c.buffer.capacity, 0u);
}

TEST_F(ConfigTest, BloscCodecsAndShuffle) {
  const Config c = Config::load(write_toml("[pipeline]\ncompress = \"blosc-zstd\"\nshuffle = \"bit\"\n"));
  EXPECT_EQ(c.pipeline.compress, Codec::kBloscZstd);
  EXPECT_EQ(c.pipeline.shuffle, Shuffle::kBit);
  Config d;
  d.set("pipeline.compress", "Blosc-LZ4");
  EXPECT_EQ(d.pipeline.compress, Codec::kBloscLz4);
  EXPECT_EQ(d.pipeline.shuffle, Shuffle::kByte) << "byte shuffle is the default of a blosc codec";
  for (const auto& [text, shuffle] :
       {std::pair{"none", Shuffle::kNone}, std::pair{"byte", Shuffle::kByte}, std::pair{" BIT ", Shuffle::kBit}}) {
    d.set("pipeline.shuffle", text);
    EXPECT_EQ(d.pipeline.shuffle, shuffle) << text;
  }
  ::setenv("RESURGO_PIPELINE_SHUFFLE", "none", 1);
  EXPECT_EQ(Config::load().pipeline.shuffle, Shuffle::kNone);
  ::unsetenv("RESURGO_PIPELINE_SHUFFLE");

  std::string m = set_error("pipeline.shuffle", "bytes");
  EXPECT_CONTAINS(m, "pipeline.shuffle");
  EXPECT_CONTAINS(m, "'bytes'");
  EXPECT_CONTAINS(m, "none, byte or bit");
  m = set_error("pipeline.compress", "blosc-gzip");
  EXPECT_CONTAINS(m, "pipeline.compress");
  EXPECT_CONTAINS(m, "blosc-lz4 or blosc-zstd");
  EXPECT_CONTAINS(load_error("[pipeline]\nshuffle = 2\n"), "pipeline.shuffle");
  EXPECT_CONTAINS(load_error("[pipeline]\nshufle = \"bit\"\n"), "pipeline.shufle");
}

// Each value of an enum (they count from 0, so `count` of them) prints as
// one word of its table, and that word, in any case, parses back into the
// value through `key`; a word the table lacks is refused with all of them.
template <class Enum, std::size_t N, class Field>
void expect_words_round_trip(const EnumName<Enum> (&names)[N], const std::string& key, Field field,
                             std::size_t count) {
  SCOPED_TRACE(key);
  EXPECT_EQ(N, count) << "a value without a word, or a word without a value";
  for (std::size_t i = 0; i < count; ++i) {
    const auto value = static_cast<Enum>(i);
    const std::string word = to_string(value);
    EXPECT_NE(word, "unknown") << "value " << i;
    Config config;
    config.set(key, word);
    EXPECT_EQ(field(config), value) << word;
    std::string shouted = " " + word + " ";
    for (char& c : shouted) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    config = Config();
    config.set(key, shouted);
    EXPECT_EQ(field(config), value) << shouted;
  }
  Config config;
  try {
    config.set(key, "no-such-word");
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "configuration key '" + key + "': unknown value 'no-such-word'; use " + list_names(names));
  }
}

TEST_F(ConfigTest, EveryEnumPrintsAndParsesTheWordsOfOneTable) {
  expect_words_round_trip(kCaptureModeNames, "capture.mode", [](const Config& c) { return c.capture.mode; }, 4);
  expect_words_round_trip(kTrackMethodNames, "track.method", [](const Config& c) { return c.track.method; }, 5);
  expect_words_round_trip(kPinPolicyNames, "buffer.pin", [](const Config& c) { return c.buffer.pin; }, 3);
  expect_words_round_trip(kTouchSettingNames, "buffer.touch", [](const Config& c) { return c.buffer.touch; }, 3);
  expect_words_round_trip(kDeviceBackendNames, "device.backend", [](const Config& c) { return c.device.backend; }, 2);
  expect_words_round_trip(kIntervalPolicyNames, "interval.policy", [](const Config& c) { return c.interval.policy; },
                          4);
  expect_words_round_trip(kPartnerSchemeNames, "partner.scheme", [](const Config& c) { return c.partner.scheme; }, 3);
  expect_words_round_trip(kCodecNames, "pipeline.compress", [](const Config& c) { return c.pipeline.compress; }, 5);
  expect_words_round_trip(kShuffleNames, "pipeline.shuffle", [](const Config& c) { return c.pipeline.shuffle; }, 3);
  expect_words_round_trip(kLogLevelNames, "log.level", [](const Config& c) { return c.log.level; }, 5);
}

TEST_F(ConfigTest, UnknownTrackMethodListsTheMethods) {
  EXPECT_EQ(set_error("track.method", "dirty-bits"),
            "configuration key 'track.method': unknown value 'dirty-bits'; use auto, uffd, soft-dirty, mprotect or hash");
  EXPECT_EQ(to_string(static_cast<TrackMethod>(200)), std::string("unknown"));
}

// The file, the environment and the API give the same enum, and the delta
// capture opens the tracker it names (tracker_conformance_test.cpp tests
// each tracker).
TEST_F(ConfigTest, TrackMethodFromEveryLayerPicksItsTracker) {
  EXPECT_EQ(Config::load().track.method, TrackMethod::kAuto);
  EXPECT_EQ(Config::load(write_toml("[track]\nmethod = \"soft-dirty\"\n")).track.method, TrackMethod::kSoftDirty);
  ::setenv("RESURGO_TRACK_METHOD", "mprotect", 1);
  EXPECT_EQ(Config::load().track.method, TrackMethod::kMprotect);
  const Config hash = Config::load("", {{"track.method", "hash"}});
  EXPECT_EQ(hash.track.method, TrackMethod::kHash);
  const Logger log("config-test", LogLevel::kOff);
  EXPECT_EQ(track::open_tracker(hash.track.method, log)->method(), TrackMethod::kHash);
  const TrackMethod chosen = track::open_tracker(TrackMethod::kAuto, log)->method();
  EXPECT_TRUE(chosen == TrackMethod::kUffd || chosen == TrackMethod::kHash) << to_string(chosen);
}

TEST_F(ConfigTest, SizeRangesNameTheKeyAndTheRange) {
  const std::string m = set_error("device.chunk", "0");
  EXPECT_CONTAINS(m, "device.chunk");
  EXPECT_CONTAINS(m, "larger than 0");
  EXPECT_EQ(set_error("device.chunk", "1"), "");
}

TEST_F(ConfigTest, ModeAsTomlIntegerAsksForAString) {
  const std::string m = load_error("[local]\nmode = 640\n");
  EXPECT_CONTAINS(m, "local.mode");
  EXPECT_CONTAINS(m, "string");
  EXPECT_CONTAINS(load_error("[persistent]\nmode = 0o640\n"), "persistent.mode");
}

// A TOML float reaches the key's own parser: a duration takes fractions,
// whole-number keys refuse them naming the key.
TEST_F(ConfigTest, TomlFloatsGoToTheKeysParser) {
  EXPECT_DOUBLE_EQ(Config::load(write_toml("[mpi]\ntimeout = 2.5\n")).mpi.timeout, 2.5);
  EXPECT_DOUBLE_EQ(Config::load(write_toml("[mpi]\ntimeout = 3.0\n")).mpi.timeout, 3.0);
  EXPECT_CONTAINS(load_error("[local]\nkeep = 2.5\n"), "local.keep");
}

TEST_F(ConfigTest, WrongTomlTypesAreErrors) {
  EXPECT_CONTAINS(load_error("[buffer]\ncapacity = 1.5\n"), "buffer.capacity");
  EXPECT_CONTAINS(load_error("[pipeline]\ncompress = true\n"), "pipeline.compress");
  EXPECT_CONTAINS(load_error("[local]\npath = [\"a\", \"b\"]\n"), "local.path");
  EXPECT_CONTAINS(load_error("[pipeline]\nthreads = -2\n"), "pipeline.threads");
}

TEST_F(ConfigTest, ChunkSizeRange) {
  Config c;
  c.set("pipeline.chunk_size", "64KiB");
  EXPECT_EQ(c.pipeline.chunk_size, 65536u);
  c.set("pipeline.chunk_size", "1GiB");
  EXPECT_EQ(c.pipeline.chunk_size, 1u << 30);
  for (const char* bad : {"65535", "1KiB", "0", "1.0001GiB", "2GiB"}) {
    const std::string m = set_error("pipeline.chunk_size", bad);
    EXPECT_CONTAINS(m, "pipeline.chunk_size");
    EXPECT_CONTAINS(m, "64KiB");
  }
}

TEST_F(ConfigTest, EnvironmentBeatsFileAndOverridesBeatEnvironment) {
  const std::string file = write_toml(
      "[local]\npath = \"/from/file\"\nkeep = 5\n[pipeline]\nchunk_size = \"1MiB\"\nthreads = 1\n");
  Config c = Config::load(file);
  EXPECT_EQ(c.local.path, "/from/file");
  EXPECT_EQ(c.pipeline.chunk_size, 1u << 20);

  ::setenv("RESURGO_LOCAL_PATH", "/from/env", 1);
  ::setenv("RESURGO_PIPELINE_CHUNK_SIZE", "2MiB", 1);
  ::setenv("RESURGO_PIPELINE_COMPRESS_LEVEL", "5", 1);
  c = Config::load(file);
  EXPECT_EQ(c.local.path, "/from/env");
  EXPECT_EQ(c.pipeline.chunk_size, 2u << 20);
  EXPECT_EQ(c.pipeline.compress_level, 5);
  EXPECT_EQ(c.local.keep, 5);  // untouched keys keep the file's value
  EXPECT_EQ(c.pipeline.threads, 1);

  c = Config::load(file, {{"local.path", "/from/override"}, {"pipeline.threads", "2"}});
  EXPECT_EQ(c.local.path, "/from/override");
  EXPECT_EQ(c.pipeline.threads, 2);
  EXPECT_EQ(c.pipeline.chunk_size, 2u << 20);

  c = Config::load();  // the environment applies without a file too
  EXPECT_EQ(c.local.path, "/from/env");
}

TEST_F(ConfigTest, BadEnvironmentVariablesNameTheVariable) {
  ::setenv("RESURGO_LOCAL_FOO", "1", 1);  // unrelated names are left alone: config_env_test.cpp
  try {
    Config::load();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "RESURGO_LOCAL_FOO");
  }
  ::unsetenv("RESURGO_LOCAL_FOO");
  ::setenv("RESURGO_PIPELINE_THREADS", "many", 1);
  try {
    Config::load();
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "RESURGO_PIPELINE_THREADS");
    EXPECT_CONTAINS(e.what(), "many");
  }
  ::unsetenv("RESURGO_PIPELINE_THREADS");
  EXPECT_NO_THROW(Config::load());
}

TEST_F(ConfigTest, ParseSize) {
  EXPECT_EQ(parse_size("k", "0"), 0u);
  EXPECT_EQ(parse_size("k", "4096"), 4096u);
  EXPECT_EQ(parse_size("k", "512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("k", "4 GiB"), 4ull << 30);
  EXPECT_EQ(parse_size("k", "1.5GB"), 1'500'000'000u);
  EXPECT_EQ(parse_size("k", "2k"), 2048u);
  EXPECT_EQ(parse_size("k", "3KB"), 3000u);
  EXPECT_EQ(parse_size("k", " 7 b "), 7u);
  EXPECT_EQ(parse_size("k", "1TiB"), 1ull << 40);
  EXPECT_EQ(parse_size("k", "2tb"), 2'000'000'000'000u);
  EXPECT_EQ(parse_size("k", "0.5MiB"), 512u << 10);
  EXPECT_EQ(parse_size("k", "1e19"), 10000000000000000000ull);  // returned 2^63 when llround overflowed
  EXPECT_EQ(parse_size("k", "18446744073709549568"), 18446744073709549568ull);  // largest double below 2^64
  // Above 2^63 llround overflowed; hex floats and sub-byte sizes were accepted.
  for (const char* bad : {"", " ", "MiB", "12 apples", "-1", "-1MiB", "1.5.5", "nan", "inf", "1e30", "20000000TiB",
                          "4 GiBs", "four", "1e20", "18446744073709551616", "0x10", "0.4", "0.1KiB0"}) {
    SCOPED_TRACE(bad);
    try {
      parse_size("buffer.capacity", bad);
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_CONTAINS(e.what(), "buffer.capacity");
    }
  }
}

// -------------------------------------------------------------- names

TEST(ConfigNames, StoreNames) {
  for (const std::string& good : std::vector<std::string>{"a", "run-1", "my_store.v2", "ABC123", std::string(128, 'x')}) {
    EXPECT_NO_THROW(validate_store_name(good)) << good;
  }
  for (const std::string& bad : std::vector<std::string>{std::string(), std::string("a/b"), std::string(".."), std::string("."),
                                std::string("x\ny"), std::string(300, 'x'), std::string(129, 'x'),
                                std::string("nul\0inside", 10), std::string("sp ace"), std::string("/abs")}) {
    EXPECT_THROW(validate_store_name(bad), InvalidArgumentError) << bad;
  }
}

TEST(ConfigNames, Labels) {
  for (const std::string& good : std::vector<std::string>{"u", "velocity field", "rho[0]", "a.b", "名前", std::string(255, 'x')}) {
    EXPECT_NO_THROW(validate_label(good)) << good;
  }
  for (const std::string& bad : std::vector<std::string>{std::string(), std::string("a/b"), std::string(".."), std::string("a..b"),
                                std::string("x\ny"), std::string("tab\there"), std::string(300, 'x'),
                                std::string(256, 'x'), std::string("nul\0inside", 10), std::string("del\x7f")}) {
    try {
      validate_label(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const InvalidArgumentError& e) {
      EXPECT_CONTAINS(e.what(), "label");
    }
  }
}

}  // namespace
}  // namespace resurgo
