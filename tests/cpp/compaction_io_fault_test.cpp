// The I/O-fault campaign (docs/reliability.md) over compaction: a chain of a
// full version and two deltas on L2 and L4 with delta.compact_after = 1, so
// version 3 is compacted on both levels, is run once per fault point of the
// calls that touch version 3's files, the compaction's reads of its bases
// and every directory sync (every third read only: neighbouring reads read
// the same file the same way), each run failing exactly that one call with
// EIO (appends: ENOSPC after half the bytes). After every run, in a fresh
// store on the plain Env:
//  (1) every visible file is a complete container that verifies, and no
//      temporary is left;
//  (2) each level where version 3 was reported durable holds it either as
//      the delta with its chain or as the compacted full version, never
//      neither: a store on that level alone restores it bit for bit;
//  (3) restart restores the newest version reported durable, bit for bit,
//      and never reports corruption.
// The runs where the fault lands in a compaction leave the delta (the
// compaction fails and is logged); the test asserts both outcomes occur.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "format/container.h"
#include "format/file_names.h"
#include "io/fault_env.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

namespace fs = std::filesystem;
using Op = FaultEnv::Op;

constexpr std::size_t kFaultBlock = 4096;
constexpr std::size_t kFaultBlocks = 16;
constexpr int kNewest = 3;  // two deltas deep: compacted on each level
const char* const kFaultStoreName = "c";

struct Outcome {
  std::map<int, int> durable;  // level -> newest version whose wait() returned
  bool fired = false;
};

// The levels where version 3 was reported durable, by what its file is now.
struct NewestCopies {
  int full = 0;
  int delta = 0;
};

class CompactionFaultRun {
 public:
  explicit CompactionFaultRun(std::vector<std::string>& violations) : violations_(violations) {}

  // Writes versions 1..kNewest through `env`, waiting for each at L2 and L4;
  // errors are the fault's, and only cost the versions they hit.
  Outcome write(const std::shared_ptr<FaultEnv>& env) {
    Outcome outcome;
    try {
      Store store = open(env);
      for (int version = 1; version <= kNewest; ++version) {
        for (std::size_t block : {static_cast<std::size_t>(version), 7 + 2 * static_cast<std::size_t>(version)}) {
          std::memset(state_.data() + block * kFaultBlock + 8, version, 300);
        }
        saved_[version] = state_;
        try {
          store.checkpoint(version);
          for (int level : {kL2, kL4}) {
            store.wait(version, level);
            outcome.durable[level] = version;
          }
        } catch (const StorageError&) {
        }
      }
      store.close();
    } catch (const StorageError&) {
    }
    outcome.fired = env->failures() > 0;
    return outcome;
  }

  // Checks (1)-(3).
  NewestCopies check(const std::string& what, const Outcome& outcome) {
    NewestCopies copies;
    for (const char* level : {"l2", "l4"}) {
      const int number = level[1] == '2' ? kL2 : kL4;
      check_files(what, level);
      if (outcome.durable.count(number) == 0 || outcome.durable.at(number) < kNewest) continue;
      expect_restored(what + " " + level + " alone", config(level, false), kNewest);
      const std::string newest = dir_.path() + "/" + level + "/" + kFaultStoreName + "/" +
                                 format::container_file_name(kNewest, 0);
      const bool full = format::read_container(*Env::posix()->open(newest)).header.base_version < 0;
      ++(full ? copies.full : copies.delta);
    }
    int newest_durable = 0;
    for (const auto& [level, version] : outcome.durable) newest_durable = std::max(newest_durable, version);
    if (newest_durable > 0) expect_restored(what, config("l2", true), newest_durable);
    return copies;
  }

 private:
  // `local` as L2; with_l4: "l4" as L4, else no L4 (a level read alone).
  Config config(const char* local, bool with_l4) const {
    return Config::load("", {{"local.path", dir_.path() + "/" + local},
                             {"persistent.path", dir_.path() + (with_l4 ? "/l4" : "/unused")},
                             {"persistent.every", with_l4 ? "1" : "0"},
                             {"local.keep", "0"},
                             {"persistent.keep", "0"},
                             {"capture.mode", "delta"},
                             {"track.method", "hash"},
                             {"track.granularity", std::to_string(kFaultBlock)},
                             {"delta.full_every", "100"},
                             {"delta.compact_after", "1"},
                             {"pipeline.chunk_size", "64KiB"},
                             {"log.level", "off"}});
  }
  Store open(std::shared_ptr<Env> env, const Config& store_config) {
    Store store(kFaultStoreName, store_config, std::move(env));
    store.protect(0, state_.data(), state_.size(), "state");
    return store;
  }
  Store open(std::shared_ptr<Env> env) { return open(std::move(env), config("l2", true)); }

  void check_files(const std::string& what, const char* level) {
    const fs::path directory = fs::path(dir_.path()) / level / kFaultStoreName;
    if (!fs::exists(directory)) return;
    for (const auto& entry : fs::directory_iterator(directory)) {
      const std::string name = entry.path().filename().string();
      int version = 0;
      int rank = 0;
      if (!format::parse_container_file_name(name, version, rank)) {
        if (format::temporary_owner(name)) violations_.push_back(what + ": temporary left: " + name);
        continue;
      }
      try {
        const std::unique_ptr<ReadableFile> file = Env::posix()->open(entry.path().string());
        const format::Container container = format::read_container(*file);
        format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
      } catch (const Error& error) {
        violations_.push_back(what + ": visible file " + name + " does not verify: " + error.what());
      }
    }
  }

  void expect_restored(const std::string& what, const Config& store_config, int durable) {
    try {
      Store store = open(Env::posix(), store_config);
      std::fill(state_.begin(), state_.end(), std::byte{0});
      const int restored = store.restart();
      if (restored < durable) {
        violations_.push_back(what + ": restored version " + std::to_string(restored) + ", " +
                              std::to_string(durable) + " was reported durable");
      } else if (state_ != saved_.at(restored)) {
        violations_.push_back(what + ": version " + std::to_string(restored) + " restored other bytes");
      }
    } catch (const Error& error) {
      violations_.push_back(what + ": restart failed: " + error.what());
    }
  }

  std::vector<std::string>& violations_;
  TempDir dir_;
  std::vector<std::byte> state_ = std::vector<std::byte>(kFaultBlocks * kFaultBlock, std::byte{1});
  std::map<int, std::vector<std::byte>> saved_;
};

TEST(CompactionIoFaultTest, EveryFaultPointOfACompactionLeavesTheChainOrTheFullVersion) {
  const std::string newest = format::container_file_name(kNewest, 0);
  const std::string base = format::container_file_name(1, 0);
  // The calls failed: version 3's files (its temporaries share its name),
  // the base the compactions read, every directory sync; a stride of 3
  // takes every third matching call.
  const std::vector<std::pair<FaultEnv::Fault, int>> targets = {
      {{Op::kCreate, EIO, newest}, 1}, {{Op::kAppend, ENOSPC, newest, 0, 1, true}, 1},
      {{Op::kSync, EIO, newest}, 1},   {{Op::kClose, EIO, newest}, 1},
      {{Op::kRename, EIO, newest}, 1}, {{Op::kOpen, EIO, newest}, 1},
      {{Op::kRead, EIO, newest}, 3},   {{Op::kOpen, EIO, base}, 1},
      {{Op::kRead, EIO, base}, 3},     {{Op::kSyncDir, EIO, ""}, 1}};
  std::vector<std::string> violations;
  int runs = 0;
  NewestCopies copies;  // over the runs
  for (auto [fault, stride] : targets) {
    // Every matching call in turn, until the fault no longer fires.
    for (fault.skip = 0;; fault.skip += stride) {
      auto env = std::make_shared<FaultEnv>();
      env->inject(fault);
      CompactionFaultRun run(violations);
      const Outcome outcome = run.write(env);
      if (!outcome.fired) break;
      ++runs;
      const std::string what = std::string(FaultEnv::op_name(fault.op)) + " #" + std::to_string(fault.skip) + " of '" +
                               fault.path_part + "' (" + std::strerror(fault.error_number) + ")";
      const NewestCopies run_copies = run.check(what, outcome);
      copies.full += run_copies.full;
      copies.delta += run_copies.delta;
    }
  }
  for (const std::string& violation : violations) ADD_FAILURE() << violation;
  std::printf("compaction io-fault: %d runs with a fault; version 3 compacted on %d levels, left a delta on %d\n",
              runs, copies.full, copies.delta);
  EXPECT_GT(runs, 30);
  EXPECT_GT(copies.delta, 0) << "no fault made a compaction fail";
  EXPECT_GT(copies.full, 0);
}

}  // namespace
}  // namespace resurgo
