// Conformance suite (DESIGN.md, "Data flow and modules"): every Capture and
// every Level run through the same cases, at the Store's public API:
//   - a round trip restores every region and the metadata bit for bit, as
//     they were when checkpoint() returned;
//   - at any instant every visible file of a level is a complete, verified
//     version (checked at every commit and every removal, from whichever
//     process makes it: a forked writer too);
//   - an I/O fault at any step of a commit (through Env) fails that version
//     only: wait() reports it, nothing partial is visible, the previous
//     version restores, and the store keeps working;
//   - eviction keeps at most `keep` versions per level and never removes an
//     L2 copy before its L4 copy is complete.
// Crash points are not exercised here: tests/fault/crash_campaign.cpp kills
// the application at each of them under every capture mode.
//
// A new Capture is one more CaptureKind (its configuration keys); a new Level
// is one more LevelKind: the keys that route versions to it alone, and a
// factory that opens it for inspection.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "format/container.h"
#include "format/file_names.h"
#include "io/fault_env.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "../sanitized.h"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

constexpr char kStore[] = "c";

// ------------------------------------------------------------ parameters

struct CaptureKind {
  const char* name;
  std::map<std::string, std::string> keys;
  const char* reported;  // VersionStats::capture of the checkpoints below
};

// The state below is about 800 KiB: "64KiB" of buffer makes copy capture
// synchronous and auto capture fork.
const CaptureKind kCaptures[] = {
    {"copy", {{"capture.mode", "copy"}}, "copy"},
    {"synchronous", {{"capture.mode", "copy"}, {"buffer.capacity", "64KiB"}}, "synchronous"},
    {"fork", {{"capture.mode", "fork"}}, "fork"},
    {"auto_copy", {{"capture.mode", "auto"}}, "copy"},
    {"auto_fork", {{"capture.mode", "auto"}, {"buffer.capacity", "64KiB"}}, "fork"},
    // Odd versions full (reported as a copy), even ones deltas on them: with
    // keep = 2 eviction then removes whole chains as it removes versions.
    {"delta", {{"capture.mode", "delta"}, {"delta.full_every", "2"}}, "copy"},
    {"delta_hash", {{"capture.mode", "delta"}, {"delta.full_every", "2"}, {"track.method", "hash"}}, "copy"},
    // The field as a device region (device.backend = host: host memory stands
    // for the device): into the L0 cache, or copied to host memory at once
    // without L0, beside host regions captured by copy or delta.
    {"device_l0", {{"device.backend", "host"}, {"device.capacity", "4MiB"}, {"device.chunk", "1MiB"}}, "copy"},
    {"device_without_l0", {{"device.backend", "host"}}, "copy"},
    {"device_delta",
     {{"capture.mode", "delta"}, {"delta.full_every", "2"}, {"device.backend", "host"}, {"device.capacity", "4MiB"}},
     "copy"},
};

struct LevelKind {
  const char* name;
  int number;
  const char* path_part;  // in every path of the level, for FaultEnv
  // Routes every version to this level alone.
  std::map<std::string, std::string> (*keys)(const std::string& root);
  // Opens the level `root` holds, for inspection (keep = 0: never evicts).
  std::unique_ptr<Level> (*open)(const std::string& root);
};

std::map<std::string, std::string> directory_keys(const std::string& root) {
  return {{"local.path", root + "/l2"}, {"persistent.path", root + "/l4"}};
}

const LevelKind kLevels[] = {
    {"L2", kL2, "/l2/",
     [](const std::string& root) {
       auto keys = directory_keys(root);
       keys["local.every"] = "1";
       keys["persistent.every"] = "0";
       return keys;
     },
     [](const std::string& root) -> std::unique_ptr<Level> {
       return std::make_unique<DirectoryLevel>(kL2, root + "/l2", kStore, 0, 0600, 0, Env::posix());
     }},
    {"L4", kL4, "/l4/",
     [](const std::string& root) {
       auto keys = directory_keys(root);
       keys["local.every"] = "0";
       keys["persistent.every"] = "1";
       return keys;
     },
     [](const std::string& root) -> std::unique_ptr<Level> {
       return std::make_unique<DirectoryLevel>(kL4, root + "/l4", kStore, 0, 0600, 0, Env::posix());
     }},
};

// ------------------------------------------------------------- helpers

// Counters in a MAP_SHARED page: a forked writer's observations reach the
// test process (an ordinary variable would be the child's own copy).
struct SharedCounters {
  std::atomic<int> checks;
  std::atomic<int> violations;
  std::atomic<unsigned> committed_at_l4;  // bit v: version v was renamed into L4 (versions < 32)
  char first_violation[512];
};

class SharedPage {
 public:
  SharedPage() {
    void* memory = ::mmap(nullptr, sizeof(SharedCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    counters_ = new (memory) SharedCounters{};
  }
  ~SharedPage() { ::munmap(counters_, sizeof(SharedCounters)); }
  SharedPage(const SharedPage&) = delete;
  SharedPage& operator=(const SharedPage&) = delete;
  SharedCounters& operator*() const { return *counters_; }
  SharedCounters* operator->() const { return counters_; }

 private:
  SharedCounters* counters_;
};

// Forwards to a FaultEnv and calls `changed` after every rename and before
// every removal: the instants at which what a level shows changes.
class ObservedEnv final : public Env {
 public:
  explicit ObservedEnv(std::shared_ptr<FaultEnv> faults) : faults_(std::move(faults)) {}

  std::function<void(const std::string& path)> after_rename;
  std::function<void(const std::string& path)> before_remove;

  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    return faults_->create(path, mode);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override { return faults_->open(path); }
  void rename(const std::string& from, const std::string& to) override {
    faults_->rename(from, to);
    if (after_rename) after_rename(to);
  }
  void remove(const std::string& path) override {
    if (before_remove) before_remove(path);
    faults_->remove(path);
  }
  void sync_dir(const std::string& dir) override { faults_->sync_dir(dir); }
  void create_dirs(const std::string& dir) override { faults_->create_dirs(dir); }
  std::vector<std::string> list_dir(const std::string& dir) override { return faults_->list_dir(dir); }
  bool exists(const std::string& path) override { return faults_->exists(path); }
  std::unique_ptr<FileLock> lock(const std::string& path) override { return faults_->lock(path); }

 private:
  std::shared_ptr<FaultEnv> faults_;
};

// Empty when `version` of `level` is complete and intact (or was removed
// meanwhile: eviction runs concurrently); else what is wrong with it.
std::string unverified(Level& level, int version) {
  try {
    const std::unique_ptr<ReadableFile> file = level.open(version);
    const format::Container container = format::read_container(*file);
    format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
  } catch (const Error& error) {
    if (!level.holds(version)) return {};
    return "version " + std::to_string(version) + " at " + level.where() + ": " + error.what();
  }
  return {};
}

// The first visible version of `level` that is not complete and intact, as
// a message; empty when all are.
std::string first_unverified(Level& level) {
  std::vector<int> versions;
  try {
    versions = level.versions();
  } catch (const StorageError&) {
    return {};  // the directory does not exist yet: nothing is visible
  }
  for (int version : versions) {
    std::string problem = unverified(level, version);
    if (!problem.empty()) return problem;
  }
  return {};
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) found.push_back(name);
  }
  return found;
}

// The protected state: three regions of different types and sizes, and
// metadata, all derived from a seed.
struct State {
  std::vector<double> field = std::vector<double>(100000);
  std::vector<std::int32_t> step = std::vector<std::int32_t>(1);
  std::vector<std::uint8_t> tags = std::vector<std::uint8_t>(1000);

  // With device.backend = host, the field is protected as a device region.
  void protect(Store& store) {
    const ElementType field_type{"float64", {100, 1000}};
    if (store.config().device.backend == DeviceBackend::kHost) {
      store.protect_device(0, field.data(), field.size() * sizeof(double), "field", field_type);
    } else {
      store.protect(0, field.data(), field.size() * sizeof(double), "field", field_type);
    }
    store.protect(1, step.data(), sizeof(std::int32_t), "step");
    store.protect(2, tags.data(), tags.size(), "tags", {"uint8", {1000}});
  }
  void set(Store& store, int seed) {
    for (std::size_t i = 0; i < field.size(); ++i) field[i] = seed * 1e6 + static_cast<double>(i) + 0.25;
    step[0] = seed;
    for (std::size_t i = 0; i < tags.size(); ++i) tags[i] = static_cast<std::uint8_t>(seed * 31 + i);
    const std::string meta = metadata(seed);
    store.set_metadata(meta.data(), meta.size());
  }
  void scribble(Store& store) {
    std::fill(field.begin(), field.end(), -1.0);
    step[0] = -1;
    std::fill(tags.begin(), tags.end(), 0xff);
    store.set_metadata("scribbled", 9);
  }
  // Empty when the regions and the store's metadata are exactly those of `seed`.
  std::string difference(const Store& store, int seed) const {
    for (std::size_t i = 0; i < field.size(); ++i) {
      if (field[i] != seed * 1e6 + static_cast<double>(i) + 0.25) return "field[" + std::to_string(i) + "] differs";
    }
    if (step[0] != seed) return "step differs";
    for (std::size_t i = 0; i < tags.size(); ++i) {
      if (tags[i] != static_cast<std::uint8_t>(seed * 31 + i)) return "tags[" + std::to_string(i) + "] differs";
    }
    const auto& meta = store.metadata();
    if (std::string(reinterpret_cast<const char*>(meta.data()), meta.size()) != metadata(seed)) {
      return "metadata differs";
    }
    return {};
  }
  static std::string metadata(int seed) { return "time step " + std::to_string(seed); }
};

std::string capture_name(const ::testing::TestParamInfo<CaptureKind>& info) { return info.param.name; }

// ----------------------------------------------------- capture x level

class ConformanceTest : public ::testing::TestWithParam<std::tuple<CaptureKind, LevelKind>> {
 protected:
  const CaptureKind& capture() const { return std::get<0>(GetParam()); }
  const LevelKind& level_kind() const { return std::get<1>(GetParam()); }

  Config config(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> keys = level_kind().keys(dir.path());
    keys["log.level"] = "off";
    keys["pipeline.chunk_size"] = "64KiB";  // several chunks per version
    for (const auto& [key, value] : capture().keys) keys[key] = value;
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::unique_ptr<Level> level() const { return level_kind().open(dir.path()); }

  // Checks every visible version of the level at each rename into it and
  // each removal from it, in this process or in a forked writer.
  void watch(ObservedEnv& env) {
    auto check = [this](const std::string&) {
      const std::unique_ptr<Level> inspected = level();
      const std::string problem = first_unverified(*inspected);
      watched->checks.fetch_add(1);
      if (!problem.empty() && watched->violations.fetch_add(1) == 0) {
        std::snprintf(watched->first_violation, sizeof watched->first_violation, "%s", problem.c_str());
      }
    };
    env.after_rename = check;
    env.before_remove = check;
  }

  // Checkpoints `version` and expects the write to fail: synchronous capture
  // reports it from checkpoint() itself, the others from wait().
  void expect_version_fails(Store& store, int version, const std::string& fault) {
    std::string message;
    try {
      store.checkpoint(version);
      store.wait(version, level_kind().number);
    } catch (const StorageError& error) {
      message = error.what();
    }
    ASSERT_FALSE(message.empty()) << fault << ": version " << version << " was reported durable";
    EXPECT_NE(message.find("version " + std::to_string(version)), std::string::npos) << fault << ": " << message;
    EXPECT_NE(message.find(dir.path()), std::string::npos) << fault << ": " << message;
  }

  TempDir dir;
  SharedPage watched;
};

TEST_P(ConformanceTest, RoundTripRestoresEveryRegionAndTheMetadataBitForBit) {
  State state;
  Store store(kStore, config());
  state.protect(store);
  state.set(store, 7);
  store.checkpoint(7);
  if (capture().reported == std::string("synchronous")) {
    EXPECT_EQ(level()->versions(), std::vector<int>{7}) << "synchronous capture returned before the version was durable";
  }
  state.scribble(store);  // the version holds the bytes of checkpoint() time
  store.wait(7, level_kind().number);
  const VersionStats stats = store.stats().at(0);
  EXPECT_EQ(stats.capture, capture().reported);
  ASSERT_NE(stats.at(level_kind().number), nullptr);
  EXPECT_GT(stats.at(level_kind().number)->stored_bytes, state.field.size() * sizeof(double));
  EXPECT_EQ(store.restart(), 7);
  EXPECT_EQ(state.difference(store, 7), "");
  EXPECT_EQ(store.last_restart().level, level_kind().number);
  EXPECT_EQ(store.last_restart().bytes, state.field.size() * sizeof(double) + sizeof(std::int32_t) + state.tags.size());
  store.close();

  State fresh;  // and from a new store, as after a crash
  Store reopened(kStore, config());
  fresh.protect(reopened);
  EXPECT_EQ(reopened.restart(), 7);
  EXPECT_EQ(fresh.difference(reopened, 7), "");
}

TEST_P(ConformanceTest, EveryVisibleVersionVerifiesWheneverTheLevelChanges) {
  // The check runs in the forked writer too, allocating there: under a
  // sanitizer that child can deadlock in the sanitizer's allocator (seen
  // twice under ASan, docs/reliability.md section 5).
  if (kSanitized && std::string(capture().reported) == "fork") {
    GTEST_SKIP() << "a forked writer that allocates can deadlock in the sanitizer's allocator";
  }
  auto env = std::make_shared<ObservedEnv>(std::make_shared<FaultEnv>());
  watch(*env);
  State state;
  Store store(kStore, config({{"local.keep", "2"}, {"persistent.keep", "2"}}), env);
  state.protect(store);
  constexpr int kVersions = 6;
  for (int version = 1; version <= kVersions; ++version) {
    state.set(store, version);
    store.checkpoint(version);
    state.scribble(store);
  }
  store.close();  // drains writes and evictions
  EXPECT_EQ(watched->violations.load(), 0) << watched->first_violation;
  // One check per commit (rename) at least, and one per eviction.
  EXPECT_GE(watched->checks.load(), kVersions + (kVersions - 2));
  EXPECT_EQ(level()->versions(), (std::vector<int>{kVersions - 1, kVersions}));
  State fresh;
  Store reopened(kStore, config());
  fresh.protect(reopened);
  EXPECT_EQ(reopened.restart(), kVersions);
  EXPECT_EQ(fresh.difference(reopened, kVersions), "");
}

// A fault injected in the parent applies in a forked writer's copy of the
// FaultEnv too, but the writer's use of it does not flow back: the parent's
// copy still holds the fault. Each case therefore clears it once the
// version has failed, and the checks look at outcomes, not at counts.
TEST_P(ConformanceTest, IoFaultAtAnyStepOfACommitFailsOnlyThatVersion) {
  struct Case {
    const char* name;
    FaultEnv::Op op;
    int error_number;
    bool partial;
  };
  const Case cases[] = {{"ENOSPC on append", FaultEnv::Op::kAppend, ENOSPC, false},
                        {"ENOSPC after half an append", FaultEnv::Op::kAppend, ENOSPC, true},
                        {"EIO on append", FaultEnv::Op::kAppend, EIO, false},
                        {"EIO on sync", FaultEnv::Op::kSync, EIO, false},
                        {"EIO on close", FaultEnv::Op::kClose, EIO, false},
                        {"EACCES on create", FaultEnv::Op::kCreate, EACCES, false},
                        {"EIO on rename", FaultEnv::Op::kRename, EIO, false},
                        {"EIO on directory sync", FaultEnv::Op::kSyncDir, EIO, false}};
  auto faults = std::make_shared<FaultEnv>();
  auto env = std::make_shared<ObservedEnv>(faults);
  watch(*env);
  State state;
  Store store(kStore, config({{"local.keep", "0"}, {"persistent.keep", "0"}}), env);
  state.protect(store);
  int version = 1;
  state.set(store, version);
  store.checkpoint(version);
  store.wait(version, level_kind().number);
  const int durable = version;
  for (const Case& c : cases) {
    faults->inject({c.op, c.error_number, level_kind().path_part, 0, 1, c.partial});
    state.set(store, ++version);
    expect_version_fails(store, version, c.name);
    faults->clear();
    const std::unique_ptr<Level> inspected = level();
    EXPECT_FALSE(inspected->holds(version)) << c.name << ": a failed version is visible";
    EXPECT_EQ(temporaries(inspected->where()), std::vector<std::string>{}) << c.name;
    EXPECT_EQ(first_unverified(*inspected), "") << c.name;
  }
  EXPECT_EQ(level()->versions(), std::vector<int>{durable});
  state.scribble(store);
  EXPECT_EQ(store.restart(), durable);
  EXPECT_EQ(state.difference(store, durable), "");
  state.set(store, ++version);  // the store works again once the fault is gone
  store.checkpoint(version);
  store.wait(version, level_kind().number);
  state.scribble(store);
  EXPECT_EQ(store.restart(), version);
  EXPECT_EQ(state.difference(store, version), "");
  store.close();
  EXPECT_EQ(watched->violations.load(), 0) << watched->first_violation;
}

std::string capture_and_level_name(const ::testing::TestParamInfo<std::tuple<CaptureKind, LevelKind>>& info) {
  return std::string(std::get<0>(info.param).name) + "_" + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(EveryCaptureAndLevel, ConformanceTest,
                         ::testing::Combine(::testing::ValuesIn(kCaptures), ::testing::ValuesIn(kLevels)),
                         capture_and_level_name);

// ------------------------------------------------- capture x route L2 -> L4

class RouteConformanceTest : public ::testing::TestWithParam<CaptureKind> {
 protected:
  Config config(std::map<std::string, std::string> extra) const {
    std::map<std::string, std::string> keys = directory_keys(dir.path());
    keys["log.level"] = "off";
    for (const auto& [key, value] : GetParam().keys) keys[key] = value;
    for (const auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::unique_ptr<Level> open(const LevelKind& kind) const { return kind.open(dir.path()); }

  TempDir dir;
  SharedPage watched;
};

// Eviction runs in the background (wait() does not wait for it); close()
// drains it, after which each level holds exactly its newest `keep` versions.
// Throughout, an L2 copy is removed only once its L4 copy is complete.
TEST_P(RouteConformanceTest, EvictionKeepsTheNewestAndNeverRemovesACopyALaterLevelNeeds) {
  struct Case {
    int local_keep, persistent_keep, every;
  };
  const LevelKind& l2 = kLevels[0];
  const LevelKind& l4 = kLevels[1];
  for (const Case c : {Case{1, 1, 1}, Case{2, 1, 1}, Case{1, 2, 1}, Case{2, 1, 2}}) {
    const std::string label = "local.keep " + std::to_string(c.local_keep) + ", persistent.keep " +
                              std::to_string(c.persistent_keep) + ", persistent.every " + std::to_string(c.every);
    fs::remove_all(dir.path() + "/l2");
    fs::remove_all(dir.path() + "/l4");
    watched->checks = 0;
    watched->violations = 0;
    watched->committed_at_l4 = 0;
    const auto version_of = [](const std::string& path) {
      int version = -1;
      int rank = -1;
      if (!format::parse_container_file_name(fs::path(path).filename().string(), version, rank)) return -1;
      return version;
    };
    auto env = std::make_shared<ObservedEnv>(std::make_shared<FaultEnv>());
    env->after_rename = [&](const std::string& path) {
      const int version = version_of(path);
      if (path.find("/l4/") == std::string::npos || version < 0 || version >= 32) return;
      // Complete when renamed (L4 may evict it again later: keep).
      if (unverified(*open(l4), version).empty()) watched->committed_at_l4.fetch_or(1u << version);
    };
    env->before_remove = [&](const std::string& path) {
      const int version = version_of(path);
      if (path.find("/l2/") == std::string::npos || version < 0) return;
      watched->checks.fetch_add(1);
      // A version routed to L4 must have been complete there before L2 lets it go.
      const bool routed_to_l4 = version % c.every == 0;
      if (routed_to_l4 && (watched->committed_at_l4.load() & (1u << version)) == 0) {
        if (watched->violations.fetch_add(1) == 0) {
          std::snprintf(watched->first_violation, sizeof watched->first_violation,
                        "L2 copy of version %d removed before its L4 copy was complete", version);
        }
      }
    };
    State state;
    constexpr int kVersions = 8;
    std::map<int, int> base_of;  // delta captures: a kept version keeps its chain
    {
      Store store(kStore,
                  config({{"local.keep", std::to_string(c.local_keep)},
                          {"persistent.keep", std::to_string(c.persistent_keep)},
                          {"persistent.every", std::to_string(c.every)}}),
                  env);
      state.protect(store);
      for (int version = 1; version <= kVersions; ++version) {
        state.set(store, version);
        store.checkpoint(version);
        store.wait(version, kL2);
      }
      store.wait();
      for (const VersionStats& stats : store.stats()) base_of[stats.version] = stats.base_version;
      store.close();
    }
    const auto with_bases = [&](std::vector<int> versions) {
      for (std::size_t i = 0; i < versions.size(); ++i) {
        const int base = base_of[versions[i]];
        if (base >= 0 && std::find(versions.begin(), versions.end(), base) == versions.end()) versions.push_back(base);
      }
      std::sort(versions.begin(), versions.end());
      return versions;
    };
    EXPECT_EQ(watched->violations.load(), 0) << label << ": " << watched->first_violation;
    std::vector<int> newest_local;
    for (int version = kVersions - c.local_keep + 1; version <= kVersions; ++version) newest_local.push_back(version);
    newest_local = with_bases(newest_local);
    EXPECT_GE(watched->checks.load(), kVersions - static_cast<int>(newest_local.size()))
        << label << ": evictions not observed";
    std::vector<int> newest_persistent;
    for (int version = kVersions; version >= 1 && static_cast<int>(newest_persistent.size()) < c.persistent_keep;
         --version) {
      if (version % c.every == 0) newest_persistent.insert(newest_persistent.begin(), version);
    }
    EXPECT_EQ(open(l2)->versions(), newest_local) << label;
    EXPECT_EQ(open(l4)->versions(), with_bases(newest_persistent)) << label;
    EXPECT_EQ(first_unverified(*open(l2)), "") << label;
    EXPECT_EQ(first_unverified(*open(l4)), "") << label;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCapture, RouteConformanceTest, ::testing::ValuesIn(kCaptures), capture_name);

}  // namespace
}  // namespace resurgo
