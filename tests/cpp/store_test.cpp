// Store-level behaviour: asynchrony, backpressure, bad input, reporting of
// background errors, damaged-file fallback and repair. What every capture
// mode and every level must do alike (round trip, atomic visibility, I/O
// faults, eviction) is in conformance_test.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <algorithm>
#include <set>
#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <thread>

#include "format/container.h"
#include "hook_env.h"
#include "io/fault_env.h"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  Config config(std::map<std::string, std::string> extra = {}) {
    std::map<std::string, std::string> keys = {{"local.path", dir.path() + "/l2"},
                                               {"persistent.path", dir.path() + "/l4"},
                                               {"persistent.every", "1"},
                                               {"log.level", "off"}};
    for (auto& [key, value] : extra) keys[key] = value;
    return Config::load("", keys);
  }
  std::string l2(int version) const { return dir.path() + "/l2/s/" + file_name(version); }
  std::string l4(int version) const { return dir.path() + "/l4/s/" + file_name(version); }
  static std::string file_name(int version) {
    char name[64];
    std::snprintf(name, sizeof name, "v%010d.r%06d.rsg", version, 0);
    return name;
  }
  static std::vector<double> field(std::size_t n, double seed) {
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = seed * 1000.0 + static_cast<double>(i);
    return values;
  }
  TempDir dir;
};

TEST_F(StoreTest, NewStoreInstanceRestartsFromFilesOfAnEarlierOne) {
  std::vector<double> u = field(5000, 2);
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(3);
  }  // closing waits for the pipeline
  std::vector<double> fresh(5000, 0.0);
  Store store("s", config());
  store.protect(0, fresh.data(), fresh.size() * sizeof(double), "u");
  EXPECT_EQ(store.latest(), 3);
  EXPECT_EQ(store.restart(), 3);
  EXPECT_EQ(fresh, u);
}

TEST_F(StoreTest, DescribeReadsARegionTableAndMetadataWithoutTheData) {
  std::vector<double> u = field(100, 1);
  std::vector<float> v(7, 2.0f);
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u", {"float64", {10, 10}});
  store.protect(5, v.data(), v.size() * sizeof(float), "v");
  const std::string note = "step 12";
  store.set_metadata(note.data(), note.size());
  store.checkpoint(4);
  const VersionDescription description = store.describe(4);
  EXPECT_EQ(description.version, 4);
  ASSERT_EQ(description.regions.size(), 2u);
  EXPECT_EQ(description.regions[0].label, "u");
  EXPECT_EQ(description.regions[0].bytes, 800u);
  EXPECT_EQ(description.regions[0].type.shape, (std::vector<std::int64_t>{10, 10}));
  EXPECT_EQ(description.regions[1].id, 5);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(description.metadata.data()), description.metadata.size()), note);
  EXPECT_THROW(store.describe(9), NotFoundError);
}

TEST_F(StoreTest, DescribeSkipsADamagedCopyAndFailsWhenEveryCopyIsDamaged) {
  std::vector<double> u = field(100, 1);
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(2);
  }
  flip_bit(l2(2), 10);  // inside the header
  Store store("s", config());
  EXPECT_EQ(store.describe(2).regions.at(0).label, "u");  // from L4
  flip_bit(l4(2), 10);
  EXPECT_THROW(store.describe(2), CorruptionError);
}

TEST_F(StoreTest, ARestartOfTheProtectedRegionsReadsAVersionInParts) {
  std::vector<double> u = field(4000, 1), v = field(3000, 2);
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.protect(1, v.data(), v.size() * sizeof(double), "v");
    store.checkpoint(1);
  }
  Store store("s", config());
  std::vector<double> only_v(3000, 0.0);
  store.protect(7, only_v.data(), only_v.size() * sizeof(double), "v");
  EXPECT_THROW(store.restart(1), MismatchError);  // the exact set is u and v
  EXPECT_EQ(store.restart(1, RestartScope::kProtectedRegions), 1);
  EXPECT_EQ(only_v, v);
  EXPECT_EQ(store.last_restart().bytes, v.size() * sizeof(double));  // u was not read
  std::vector<double> w(10);
  store.protect(8, w.data(), w.size() * sizeof(double), "w");
  EXPECT_THROW(store.restart(1, RestartScope::kProtectedRegions), MismatchError);  // w is not in the version
}

TEST_F(StoreTest, PersistCopiesAVersionKeptOnlyInMemoryToDisk) {
  std::vector<double> u = field(3000, 3);
  const Config memory_only =
      config({{"memory.every", "1"}, {"local.every", "0"}, {"persistent.every", "0"}, {"memory.keep", "1"}});
  {
    Store store("s", memory_only);
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(1);
    store.checkpoint(2);
    EXPECT_FALSE(fs::exists(l2(2)));
    EXPECT_THROW(store.persist(2, kL1), InvalidArgumentError);
    store.persist(2, kL2);
    EXPECT_TRUE(fs::exists(l2(2)));
    store.persist(2, kL2);  // already there: nothing to do
    EXPECT_THROW(store.persist(7, kL2), NotFoundError);
  }
  std::vector<double> fresh(3000, 0.0);
  Store store("s", memory_only);
  store.protect(0, fresh.data(), fresh.size() * sizeof(double), "u");
  EXPECT_EQ(store.restart(), 2);
  EXPECT_EQ(fresh, u);
}

TEST_F(StoreTest, CompressedVersionsRoundTrip) {
  for (const char* codec : {"lz4", "zstd"}) {
    std::vector<std::int64_t> values(200000);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i / 64);  // runs
    const std::string name = std::string("c") + codec;
    Store store(name, config({{"pipeline.compress", codec}, {"persistent.every", "0"}}));
    store.protect(0, values.data(), values.size() * sizeof(std::int64_t), "values");
    store.checkpoint(1);
    store.wait(1, 2);
    const auto saved = values;
    std::fill(values.begin(), values.end(), 0);
    EXPECT_EQ(store.restart(1), 1);
    EXPECT_EQ(values, saved) << codec;
    EXPECT_LT(store.stats().at(0).at(kL2)->stored_bytes, saved.size() * sizeof(std::int64_t) / 2) << codec;
  }
}

// Through the whole store: the region's dtype gives blosc its element size.
TEST_F(StoreTest, BloscShuffledVersionsRoundTrip) {
  for (const char* codec : {"blosc-lz4", "blosc-zstd"}) {
    for (const char* shuffle : {"byte", "bit"}) {
      std::vector<double> values(200001);  // smooth: shared high bytes, noisy low ones
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = 300.0 + 1e-3 * static_cast<double>(i % 5000);
      const std::string name = std::string(codec) + "-" + shuffle;
      Store store(name, config({{"pipeline.compress", codec}, {"pipeline.shuffle", shuffle}, {"persistent.every", "0"}}));
      store.protect(0, values.data(), values.size() * sizeof(double), "values", {"float64", {200001}});
      store.checkpoint(1);
      store.wait(1, 2);
      const auto saved = values;
      std::fill(values.begin(), values.end(), 0.0);
      EXPECT_EQ(store.restart(1), 1);
      EXPECT_EQ(values, saved) << name;
      EXPECT_LT(store.stats().at(0).at(kL2)->stored_bytes, saved.size() * sizeof(double) / 2) << name;
    }
  }
}

TEST_F(StoreTest, WaitMakesVersionDurableAtTheAskedLevel) {
  std::vector<double> u = field(10000, 3);
  Store store("s", config({{"persistent.every", "2"}}));
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  store.checkpoint(1);
  store.wait(1, 2);
  EXPECT_TRUE(fs::exists(l2(1)));
  EXPECT_THROW(store.wait(1, 4), InvalidArgumentError);  // only every 2nd checkpoint goes to L4
  store.checkpoint(2);
  store.wait(2, 4);
  EXPECT_TRUE(fs::exists(l4(2)));
  EXPECT_FALSE(fs::exists(l4(1)));
  EXPECT_THROW(store.wait(2, 3), InvalidArgumentError);
  EXPECT_THROW(store.wait(99, 2), NotFoundError);
  const auto versions = store.versions();
  ASSERT_EQ(versions.size(), 2u);
  EXPECT_EQ(versions[1].version, 2);
  EXPECT_EQ(versions[1].levels, (std::vector<int>{2, 4}));
  EXPECT_FALSE(versions[1].pending);
  const auto stats = store.stats();
  ASSERT_EQ(stats.size(), 2u);
  ASSERT_NE(stats[1].at(kL4), nullptr);
  EXPECT_GE(stats[1].at(kL4)->seconds_to_level, stats[1].at(kL2)->seconds_to_level);
  EXPECT_GT(stats[1].at(kL2)->seconds_to_level, 0.0);
  EXPECT_GT(stats[1].at(kL4)->stored_bytes, u.size() * sizeof(double));
  EXPECT_EQ(stats[0].at(kL4), nullptr);  // version 1 does not go to L4
}

// An Env whose file creation waits until the test opens the gate, so the
// flush thread holds the buffer block as long as the test wants.
// Holds every caller of wait() until open() is called.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

TEST_F(StoreTest, CheckpointWaitsForBufferSpaceAndCountsItAsBlocking) {
  std::vector<double> u = field(1 << 16, 5);
  const std::size_t bytes = u.size() * sizeof(double);
  Gate gate;
  auto env = std::make_shared<HookEnv>();
  env->before_create = [&](const std::string& path) {
    if (path.find("/.v") != std::string::npos) gate.wait();  // a version's file, not the identity's
  };
  Store store("s", config({{"buffer.capacity", std::to_string(bytes)}, {"persistent.every", "0"}}), env);
  store.protect(0, u.data(), bytes, "u");
  store.checkpoint(1);  // fills the buffer; its flush waits at the gate
  std::atomic<bool> second_returned{false};
  std::thread second([&] {
    store.checkpoint(2);
    second_returned = true;
  });
  const auto held = std::chrono::milliseconds(100);
  std::this_thread::sleep_for(held);  // the measured interval, not synchronisation
  const bool returned_while_full = second_returned;
  gate.open();
  second.join();
  store.wait();
  EXPECT_FALSE(returned_while_full);
  const auto stats = store.stats();
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_GE(stats[1].backpressure_seconds, 0.05);
  EXPECT_GE(stats[1].blocking_seconds, stats[1].backpressure_seconds);
  EXPECT_EQ(stats[1].capture, "copy");
}

// The default buffer of a small state holds many versions (at least
// kSmallStateBuffer): checkpoints every few milliseconds go on while the
// writer waits for a disk, and report no backpressure. With the old rule
// (twice the state) the third checkpoint here waited for the gate.
TEST_F(StoreTest, SmallStatesDoNotWaitForTheWriterWithTheDefaultBuffer) {
  std::vector<double> u = field(512, 5);  // 4 KiB
  Gate gate;
  auto env = std::make_shared<HookEnv>();
  env->before_create = [&](const std::string& path) {
    if (path.find("/.v") != std::string::npos) gate.wait();  // a version's file, not the identity's
  };
  Store store("s", config({{"persistent.every", "0"}}), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  constexpr int kVersions = 200;
  auto checkpoints = std::async(std::launch::async, [&] {
    for (int version = 1; version <= kVersions; ++version) store.checkpoint(version);
  });
  const bool returned_while_held = checkpoints.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  gate.open();
  checkpoints.get();
  store.wait();
  EXPECT_TRUE(returned_while_held) << "checkpoints of a 4 KiB state waited for the writer";
  const auto stats = store.stats();
  ASSERT_EQ(stats.size(), static_cast<std::size_t>(kVersions));
  for (const VersionStats& version : stats) EXPECT_EQ(version.backpressure_seconds, 0.0) << version.version;
}

// With L4 slower than L2, versions waiting for their L4 copy must not pile
// up on the node-local disk: the flush keeps L4's pace.
TEST_F(StoreTest, SlowL4HoldsBackTheFlushInsteadOfPilingUpL2Files) {
  std::vector<double> u = field(8192, 1);
  auto env = std::make_shared<HookEnv>();
  std::mutex mutex;
  std::set<std::string> waiting_for_l4;  // file names committed at L2, not yet at L4
  std::size_t most_waiting = 0;
  env->before_create = [](const std::string& path) {
    if (path.find("/l4/") != std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // slow L4
  };
  env->after_rename = [&](const std::string&, const std::string& to) {
    std::lock_guard lock(mutex);
    const std::string name = fs::path(to).filename().string();
    if (name.front() != 'v') return;  // the store's identity file
    if (to.find("/l2/") != std::string::npos) {
      waiting_for_l4.insert(name);
      most_waiting = std::max(most_waiting, waiting_for_l4.size());
    } else {
      waiting_for_l4.erase(name);
    }
  };
  Store store("s", config({{"buffer.capacity", "16MiB"}, {"persistent.every", "1"}, {"local.keep", "0"},
                           {"persistent.keep", "0"}}), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  for (int version = 1; version <= 20; ++version) store.checkpoint(version);
  store.wait(20, 4);
  EXPECT_TRUE(waiting_for_l4.empty());
  EXPECT_LE(most_waiting, 3u);  // two waiting for their copy, plus the one just written
}

// With L4 behind, the persist thread always has a copy to make; evictions
// must still run between copies, or L2 keeps every copied version.
TEST_F(StoreTest, EvictionKeepsUpWhileL4IsBehind) {
  std::vector<double> u = field(8192, 2);
  auto env = std::make_shared<HookEnv>();
  std::size_t most_local_files = 0;  // written by the flush thread only
  env->before_create = [](const std::string& path) {
    if (path.find("/l4/") != std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // slow L4
  };
  env->after_rename = [&](const std::string&, const std::string& to) {
    if (to.find("/l2/") == std::string::npos) return;
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(fs::path(to).parent_path())) {
      files += entry.path().extension() == ".rsg" ? 1 : 0;
    }
    most_local_files = std::max(most_local_files, files);
  };
  Store store("s", config({{"buffer.capacity", "16MiB"}, {"persistent.every", "1"}, {"local.keep", "2"},
                           {"persistent.keep", "0"}}), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  for (int version = 1; version <= 30; ++version) store.checkpoint(version);
  store.wait(30, 4);
  // keep (2) + two waiting for their L4 copy + the one just written + one
  // whose eviction waits for the copy in progress.
  EXPECT_LE(most_local_files, 6u);
}

// The niceness of this process's threads that carry `name` (from
// /proc/self/task/*/comm), read from field 19 of their stat files.
std::vector<int> niceness_of_threads_named_now(const std::string& name) {
  std::vector<int> found;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    std::string stat;
    std::getline(std::ifstream(task.path() / "stat"), stat);
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // the name may hold spaces
    std::string field;
    for (int number = 3; number <= 19 && fields >> field; ++number) {
    }
    found.push_back(std::stoi(field));
  }
  return found;
}

// The same, waiting up to 10 s for such a thread: a worker names itself
// once it has set its priority, soon after the store opened.
std::vector<int> niceness_of_threads_named(const std::string& name) {
  std::vector<int> found;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (found.empty() && std::chrono::steady_clock::now() < deadline) {
    found = niceness_of_threads_named_now(name);
    if (found.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return found;
}

// A level that only copies what an earlier level already holds yields the
// cores to the application; a level that writes snapshots does not.
TEST_F(StoreTest, LevelThatOnlyCopiesRunsAtLowerPriority) {
  const int base = ::getpriority(PRIO_PROCESS, 0);
  {
    Store store("s", config({{"local.every", "1"}, {"persistent.every", "1"}}));
    EXPECT_EQ(niceness_of_threads_named("rsg level L2"), std::vector<int>{base});
    EXPECT_EQ(niceness_of_threads_named("rsg level L4"), std::vector<int>{std::min(base + 10, 19)});
  }
  Store store("s", config({{"local.every", "2"}, {"persistent.every", "1"}}));  // L4 alone takes the odd ones
  EXPECT_EQ(niceness_of_threads_named("rsg level L4"), std::vector<int>{base});
}

TEST_F(StoreTest, BadArgumentsAreRejectedWithClearErrors) {
  std::vector<double> u(16, 1.0), v(16, 2.0);
  Store store("s", config());
  EXPECT_THROW(store.checkpoint(1), InvalidArgumentError);  // nothing protected
  EXPECT_THROW(store.protect(0, nullptr, 8, "u"), InvalidArgumentError);
  EXPECT_THROW(store.protect(0, u.data(), 0, "u"), InvalidArgumentError);
  EXPECT_THROW(store.protect(0, u.data(), 8, "a/b"), InvalidArgumentError);
  EXPECT_THROW(store.protect(0, u.data(), 8, std::string("a\0b", 3)), InvalidArgumentError);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_THROW(store.protect(0, v.data(), 8, "v"), InvalidArgumentError);  // duplicate id
  try {
    store.protect(1, v.data(), 8, "u");
    FAIL() << "duplicate label accepted";
  } catch (const InvalidArgumentError& error) {
    EXPECT_NE(std::string(error.what()).find("'u'"), std::string::npos);
  }
  EXPECT_THROW(store.unprotect(9), NotFoundError);
  EXPECT_THROW(store.checkpoint(-1), InvalidArgumentError);
  store.checkpoint(5);
  EXPECT_THROW(store.checkpoint(5), InvalidArgumentError);  // reused
  EXPECT_THROW(store.checkpoint(4), InvalidArgumentError);  // older
  EXPECT_THROW(store.restart(-7), InvalidArgumentError);
  EXPECT_THROW(store.restart(6), NotFoundError);
  EXPECT_THROW(store.set_metadata(nullptr, 3), InvalidArgumentError);
  EXPECT_THROW(Store("bad/name", config()), InvalidArgumentError);
  EXPECT_THROW(Store("..", config()), InvalidArgumentError);
}

TEST_F(StoreTest, RestartIntoOtherRegionsFailsNamingTheRegion) {
  std::vector<double> u(100, 1.0), w(50, 2.0);
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u", {"float64", {100}});
    store.checkpoint(1);
  }
  {
    Store store("s", config());
    store.protect(0, w.data(), w.size() * sizeof(double), "u");
    try {
      store.restart();
      FAIL() << "size mismatch accepted";
    } catch (const MismatchError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("'u'"), std::string::npos) << message;
      EXPECT_NE(message.find("400"), std::string::npos) << message;
      EXPECT_NE(message.find("800"), std::string::npos) << message;
      EXPECT_NE(message.find("(version 1, "), std::string::npos) << "names the copy read: " << message;
    }
    EXPECT_EQ(w, std::vector<double>(50, 2.0));  // nothing overwritten
  }
  {
    Store store("s", config());
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.protect(1, w.data(), w.size() * sizeof(double), "w");
    EXPECT_THROW(store.restart(), MismatchError);  // extra protected region
  }
  {
    Store store("s", config());
    store.protect(0, w.data(), w.size() * sizeof(double), "other");
    EXPECT_THROW(store.restart(), MismatchError);  // region missing
  }
  {
    Store store("s", config());
    std::vector<float> f(200);
    store.protect(0, f.data(), f.size() * sizeof(float), "u", {"float32", {200}});
    EXPECT_THROW(store.restart(), MismatchError);  // same bytes, other dtype
  }
}

TEST_F(StoreTest, SecondOpenOfTheSameStoreIsRefused) {
  Store first("s", config());
  EXPECT_THROW(Store("s", config()), StateError);
}

TEST_F(StoreTest, UnusableDirectoryFailsAtOpen) {
  write_file(dir.path() + "/plain", {std::byte{1}});
  EXPECT_THROW(Store("s", config({{"local.path", dir.path() + "/plain/sub"}})), StorageError);
}

TEST_F(StoreTest, ClosedStoreRefusesCalls) {
  std::vector<double> u(4, 1.0);
  Store store("s", config());
  store.protect(0, u.data(), sizeof(double) * 4, "u");
  store.close();
  store.close();  // idempotent
  EXPECT_THROW(store.checkpoint(1), StateError);
  EXPECT_THROW(store.restart(), StateError);
}

TEST_F(StoreTest, TraceFileIsValidChromeTraceJson) {
  std::vector<double> u = field(1000, 7);
  const std::string trace = dir.path() + "/trace.json";
  {
    Store store("s", config({{"trace.path", trace}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(1);
    store.wait(1, 4);
    store.restart();
  }
  std::ifstream in(trace);
  const auto document = nlohmann::json::parse(in);
  std::set<std::string> names;
  for (const auto& event : document.at("traceEvents")) names.insert(event.at("name").get<std::string>());
  for (const char* expected : {"capture", "write L2", "copy L2 to L4", "restore from L2", "thread_name"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
}

// Many versions in flight, each copied to L4 and evicted, then close(): the
// pipeline must settle. (Setting 'finished' in two critical sections once
// let a fast L4 copy be overwritten, and close() waited forever.)
TEST_F(StoreTest, CloseSettlesWithManyVersionsInFlight) {
  std::vector<double> u = field(4096, 11);
  constexpr int kRounds = 10;
  constexpr int kVersions = 20;
  for (int round = 0; round < kRounds; ++round) {
    Store store("s", config({{"local.keep", "1"}, {"persistent.keep", "1"}, {"buffer.capacity", "256KiB"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    const int first = store.latest().value_or(-1) + 1;
    for (int version = first; version < first + kVersions; ++version) store.checkpoint(version);
    store.close();
  }
  Store store("s", config());
  EXPECT_EQ(store.latest(), kRounds * kVersions - 1);
  EXPECT_EQ(store.versions().size(), 1u);
}

// ------------------------------------------------------------------ faults

class StoreFaultTest : public StoreTest {
 protected:
  std::shared_ptr<FaultEnv> env = std::make_shared<FaultEnv>();
};

TEST_F(StoreFaultTest, BackgroundErrorIsReportedOnceByTheNextCall) {
  std::vector<double> u = field(1000, 9);
  Store store("s", config({{"persistent.every", "0"}}), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  env->inject({FaultEnv::Op::kAppend, ENOSPC, "", 0, 1, false});
  store.checkpoint(1);
  // versions() observes without reporting; loop until the flush has failed.
  for (int i = 0; i < 1000000 && !store.versions().empty(); ++i) std::this_thread::yield();
  ASSERT_TRUE(store.versions().empty());
  try {
    store.checkpoint(2);
    FAIL() << "background error not reported";
  } catch (const StorageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("checkpoint 2 not taken"), std::string::npos) << message;
    EXPECT_NE(message.find("version 1 "), std::string::npos) << message;
    EXPECT_NE(message.find("No space left"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(store.checkpoint(2));  // reported once only; this one is taken
  EXPECT_NO_THROW(store.wait(2, 2));
}

// A missing directory is made with the first version sent there: a
// read-only one fails that version. One that exists is prepared at open.
TEST_F(StoreFaultTest, ReadOnlyOrUnreadableDirectoryFailsNamingIt) {
  std::vector<double> u = field(100, 1);
  env->inject({FaultEnv::Op::kCreateDirs, EROFS, "/l2", 0, 1, false});
  try {
    Store store("s", config(), env);
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    store.checkpoint(1);
    store.wait(1, kL2);
    ADD_FAILURE() << "version 1 reached L2";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.path() + "/l2"), std::string::npos) << error.what();
  }
  env->clear();
  fs::create_directories(dir.path() + "/l2/s");
  env->inject({FaultEnv::Op::kList, EACCES, "/l2", 0, 1, false});
  try {
    Store store("s", config(), env);
    ADD_FAILURE() << "open succeeded";
  } catch (const StorageError& error) {
    EXPECT_NE(std::string(error.what()).find(dir.path() + "/l2"), std::string::npos) << error.what();
  }
  env->clear();
  EXPECT_NO_THROW(Store("s", config(), env));  // usable again once the fault is gone
}

TEST_F(StoreFaultTest, PersistentCopyFailureKeepsTheLocalCopy) {
  std::vector<double> u = field(1000, 10);
  Store store("s", config(), env);
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  env->inject({FaultEnv::Op::kAppend, EIO, "/l4/", 0, 1, false});
  store.checkpoint(1);
  EXPECT_NO_THROW(store.wait(1, 2));
  EXPECT_THROW(store.wait(1, 4), StorageError);
  EXPECT_TRUE(fs::exists(l2(1)));
  EXPECT_FALSE(fs::exists(l4(1)));
}

// ------------------------------------------------------- damaged versions

class StoreDamageTest : public StoreTest {
 protected:
  void SetUp() override {
    Store store("s", config({{"local.keep", "0"}, {"persistent.keep", "0"}}));
    store.protect(0, u.data(), u.size() * sizeof(double), "u");
    for (int version = 1; version <= 3; ++version) {
      const std::vector<double> values = field(u.size(), version);
      std::copy(values.begin(), values.end(), u.begin());  // keeps the protected pointer
      store.checkpoint(version);
      store.wait(version, 4);
    }
  }
  int restart_fresh(Store*& out_store) {
    std::fill(u.begin(), u.end(), 0.0);
    store_ = std::make_unique<Store>("s", config({{"local.keep", "0"}, {"persistent.keep", "0"}}));
    store_->protect(0, u.data(), u.size() * sizeof(double), "u");
    out_store = store_.get();
    return store_->restart();
  }
  std::uint64_t data_offset() const { return fs::file_size(l2(3)) / 2; }
  std::vector<double> u = std::vector<double>(50000);
  std::unique_ptr<Store> store_;
};

TEST_F(StoreDamageTest, DamagedLocalCopyIsReadFromL4AndRepaired) {
  flip_bit(l2(3), data_offset());
  Store* store = nullptr;
  EXPECT_EQ(restart_fresh(store), 3);
  EXPECT_EQ(u, field(u.size(), 3));
  EXPECT_EQ(store->last_restart().level, 4);
  ASSERT_EQ(store->last_restart().skipped.size(), 1u);
  EXPECT_NE(store->last_restart().skipped[0].find("checksum"), std::string::npos);
  EXPECT_EQ(read_file(l2(3)), read_file(l4(3)));  // repaired
}

// The record stored before each chunk duplicates its index entry; restore
// reads only the index, but damage to the duplicate still means a bad copy.
TEST_F(StoreDamageTest, DamagedChunkRecordIsDetectedAndRepaired) {
  const auto file = Env::posix()->open(l2(3));
  const std::uint64_t record = format::read_container(*file).chunks.at(0).file_offset - 48;
  flip_bit(l2(3), record + 20);  // raw_length
  Store* store = nullptr;
  EXPECT_EQ(restart_fresh(store), 3);
  EXPECT_EQ(store->last_restart().level, 4);
  ASSERT_EQ(store->last_restart().skipped.size(), 1u);
  EXPECT_NE(store->last_restart().skipped[0].find("disagrees with the index"), std::string::npos);
  EXPECT_EQ(read_file(l2(3)), read_file(l4(3)));
}

TEST_F(StoreDamageTest, VersionDamagedEverywhereFallsBackToTheNewestIntactOne) {
  flip_bit(l2(3), data_offset());
  fs::resize_file(l4(3), fs::file_size(l4(3)) - 100);
  Store* store = nullptr;
  EXPECT_EQ(restart_fresh(store), 2);
  EXPECT_EQ(u, field(u.size(), 2));
  EXPECT_EQ(store->last_restart().skipped.size(), 2u);
  EXPECT_TRUE(fs::exists(l2(3) + ".damaged"));  // quarantined, not deleted
  EXPECT_EQ(store->latest(), 2);
  EXPECT_NO_THROW(store->checkpoint(3));  // the lost version can be written again
  store->wait(3, 2);
}

TEST_F(StoreDamageTest, AskingForADamagedVersionFails) {
  flip_bit(l2(2), 10);
  flip_bit(l4(2), data_offset());
  std::fill(u.begin(), u.end(), 0.0);
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_THROW(store.restart(2), CorruptionError);
  EXPECT_TRUE(fs::exists(l2(2)));  // not quarantined on an explicit request
}

TEST_F(StoreDamageTest, FileOfAnotherVersionRenamedInPlaceIsDetected) {
  fs::copy_file(l2(1), l2(3), fs::copy_options::overwrite_existing);
  fs::copy_file(l4(1), l4(3), fs::copy_options::overwrite_existing);
  Store* store = nullptr;
  EXPECT_EQ(restart_fresh(store), 2);
}

TEST_F(StoreDamageTest, ForeignFileIsSkipped) {
  write_file(l2(3), std::vector<std::byte>(4096, std::byte{'x'}));
  write_file(l4(3), {});
  Store* store = nullptr;
  EXPECT_EQ(restart_fresh(store), 2);
}

TEST_F(StoreDamageTest, NothingIntactIsACorruptionError) {
  for (int version = 1; version <= 3; ++version) {
    flip_bit(l2(version), 30);
    flip_bit(l4(version), 30);
  }
  std::fill(u.begin(), u.end(), 0.0);
  Store store("s", config());
  store.protect(0, u.data(), u.size() * sizeof(double), "u");
  EXPECT_THROW(store.restart(), CorruptionError);
}

}  // namespace
}  // namespace resurgo
