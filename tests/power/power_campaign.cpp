// Power-loss campaign (docs/reliability.md): runs checkpoint workloads
// through a PowerLossEnv, which records every file and directory operation,
// then cuts the history at operation after operation and, for each cut,
// materialises several states the disk could hold after a power failure
// there. On each state a fresh store, on the plain POSIX Env, restarts.
// Invariants, per state and store (a store with a scratch L2: below):
//   - no visible checkpoint file is damaged or partial (the commit protocol
//     makes a version visible only once complete and durable);
//   - restart restores the newest version whose wait() returned before the
//     cut, or a newer one, bit for bit; never a damaged version;
//   - restart and verification never crash, and the copies restart skipped
//     are counted;
//   - nothing durable is deleted: after the restart each level still holds
//     the newest version reported durable there, or a newer intact one.
// Two workloads damage copies on purpose (bit rot) before reopening, so that
// power also fails while restart repairs a copy or quarantines a version;
// those copies are excused, and a version whose every copy was damaged is
// no longer expected.
// Three workloads (a fourth on a scratch L2, below) capture deltas whose
// chains outgrow delta.compact_after, so that power also fails while a
// compaction rewrites a version in place (docs/tracking.md, "Compaction"):
// the cut must leave the delta with its chain or the full version, and
// restart the newest durable version's bytes.
// Four workloads keep a scratch L2 (local.durable = false: its commits and
// removals sync nothing), which promises less: its files survive a crash of
// the process, not a power loss. For such a store, an L2 file may be torn,
// partial or missing after the cut (counted, not a violation), and the
// version restart must reach is the newest reported durable at L4 (none
// without L4); the rest holds as for any store: what restart restores is
// the version's bytes bit for bit, L4 keeps what it reported durable, no
// visible L4 file is damaged, and restart never fails or crashes.
//
//   power_campaign [--states N] [--seed S] [--semantics posix|ordered|both] [--dir PATH]
//
// A history depends on thread timing, so a seed reproduces the states drawn
// from a history, not the history; a failing state's directory is kept,
// with the history beside it (failed-N.history, the cut marked).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../fault/application.h"
#include "../fault/campaign_main.h"
#include "format/container.h"
#include "power_loss_env.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/directory_level.h"

namespace resurgo::power {
namespace {

namespace fs = std::filesystem;

constexpr char kRoot[] = "/power-loss";  // the recorded file system's root
constexpr int kMinStatesPerCut = 2;      // a workload is cut at every operation when the budget allows this many
constexpr int kFailuresKept = 5;         // failing states whose directories are kept

// ---------------------------------------------------------------- workloads

// How the store captures the application's memory: copy into the host
// buffer, or (buffer smaller than a version) synchronously from the
// application's memory; or delta: only the blocks written since the previous
// version (hash tracking, in-process), a full version every kDeltaFullEvery.
// A forked child cannot run here: it writes through
// its own copy of this in-memory Env, which the recording never sees, so
// fork and auto-beyond-the-buffer are covered by the crash campaign (real
// files, SIGKILL) and the conformance suite instead. Another in-process
// mode is one more enumerator here, one more case in `configure`, and rows.
enum class Capture { kCopy, kDelta };

constexpr int kDeltaFullEvery = 1000;  // chains end where compaction, not capture, ends them

struct StoreSpec {
  const char* name;
  std::size_t field_values;  // doubles in the first region
  std::size_t tag_bytes;     // bytes in the second
  int local_keep;
  int persistent_keep;
  int every;                 // every n-th version to L4; 0: L2 only
  const char* codec;
  const char* buffer;        // smaller than a version: synchronous checkpoints
  bool scratch = false;      // local.durable = false: checked by the scratch contract (check_store)
};

// Bit rot applied to the newest version of every store just before the
// reopen, so that power fails while restart repairs or quarantines.
enum class Damage {
  kNone,
  kL2Copy,       // the L2 copy: restart restores from L4 and rewrites L2
  kEveryCopy,    // every copy: restart quarantines the version and falls back
};

struct Workload {
  const char* name;
  Capture capture;
  std::vector<StoreSpec> stores;  // checkpointed in turn, in the same directories
  int versions;
  int reopen_after;               // close, reopen and restart after this version; 0: never
  Damage damage;
  int compact_after = 0;          // delta.compact_after (delta capture)
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> table = {
      {"one-L2", Capture::kCopy, {{"alpha", 9000, 20001, 1, 1, 0, "none", "auto"}}, 4, 0, Damage::kNone},
      {"L2+L4", Capture::kCopy, {{"alpha", 9000, 20001, 2, 1, 1, "none", "auto"}}, 4, 0, Damage::kNone},
      {"L4-every-2-zstd", Capture::kCopy, {{"beta", 20000, 7777, 1, 2, 2, "zstd", "64KiB"}}, 6, 0, Damage::kNone},
      {"blosc-L2+L4", Capture::kCopy, {{"beta", 20000, 7777, 2, 1, 1, "blosc-zstd", "auto"}}, 4, 0, Damage::kNone},
      {"two-stores", Capture::kCopy,
       {{"alpha", 12000, 5000, 2, 1, 1, "lz4", "auto"}, {"gamma", 3000, 90001, 1, 1, 3, "none", "128KiB"}}, 5, 0,
       Damage::kNone},
      {"keep-all-reopen", Capture::kCopy, {{"delta", 9000, 3000, 0, 0, 1, "zstd", "auto"}}, 6, 3, Damage::kNone},
      {"repair-L2", Capture::kCopy, {{"alpha", 9000, 20001, 2, 2, 1, "lz4", "auto"}}, 5, 3, Damage::kL2Copy},
      {"quarantine", Capture::kCopy, {{"alpha", 9000, 20001, 2, 2, 1, "none", "auto"}}, 5, 3, Damage::kEveryCopy},
      {"long", Capture::kCopy,
       {{"alpha", 16000, 40000, 2, 2, 2, "lz4", "auto"}, {"beta", 2000, 1000, 1, 3, 1, "none", "32KiB"}}, 16, 8,
       Damage::kNone},
      // Compaction on both levels (every version goes to L4), each chain of
      // two deltas rewritten, then the old links evicted.
      {"delta-compact", Capture::kDelta, {{"alpha", 9000, 20001, 2, 2, 1, "none", "auto"}}, 6, 0, Damage::kNone, 1},
      // Synchronous zstd deltas on L2 alone; the reopen restarts from a
      // compacted version and the chain grows again from it.
      {"delta-compact-reopen", Capture::kDelta, {{"beta", 20000, 7777, 1, 1, 0, "zstd", "64KiB"}}, 8, 4,
       Damage::kNone, 2},
      // Restart repairs a compacted version's L2 copy from L4.
      {"delta-compact-repair", Capture::kDelta, {{"alpha", 9000, 20001, 2, 2, 1, "lz4", "auto"}}, 5, 3,
       Damage::kL2Copy, 1},
      // A scratch L2 (local.durable = false) syncs nothing: its files may be
      // torn or gone after the cut, and restart must skip them. L2 alone,
      // with a reopen that restarts from scratch files.
      {"scratch-L2", Capture::kCopy, {{"alpha", 9000, 20001, 2, 1, 0, "none", "auto", true}}, 5, 3, Damage::kNone},
      // A scratch L2 copied to L4 at every version, beside a durable store
      // in the same directories, whose invariants stay those of a durable L2.
      {"scratch-L2+L4", Capture::kCopy,
       {{"alpha", 12000, 5000, 2, 1, 1, "lz4", "auto", true}, {"gamma", 3000, 90001, 1, 1, 3, "none", "128KiB"}}, 5,
       0, Damage::kNone},
      // Every second version to L4, synchronous zstd checkpoints: restart
      // may find a newer intact scratch version or fall back to L4.
      {"scratch-L4-every-2", Capture::kCopy, {{"beta", 20000, 7777, 1, 2, 2, "zstd", "64KiB", true}}, 6, 0,
       Damage::kNone},
      // Deltas on a scratch L2 alone, compacted in place: a torn base makes
      // its deltas unrestorable, and the unsynced rename of a compaction
      // may be undone.
      {"scratch-delta-compact", Capture::kDelta, {{"alpha", 9000, 20001, 2, 2, 0, "none", "auto", true}}, 6, 0,
       Damage::kNone, 1},
  };
  return table;
}

const char* capture_name(Capture capture) {
  switch (capture) {
    case Capture::kCopy: return "copy";
    case Capture::kDelta: return "delta";
  }
  return "?";
}

Config configure(const StoreSpec& spec, const Workload& workload, const std::string& root) {
  std::map<std::string, std::string> settings = {{"local.path", root + "/l2"},
                                                 {"persistent.path", root + "/l4"},
                                                 {"local.keep", std::to_string(spec.local_keep)},
                                                 {"persistent.keep", std::to_string(spec.persistent_keep)},
                                                 {"persistent.every", std::to_string(spec.every)},
                                                 {"pipeline.compress", spec.codec},
                                                 {"pipeline.chunk_size", "64KiB"},
                                                 {"buffer.capacity", spec.buffer},
                                                 {"log.level", "off"}};
  if (spec.scratch) settings["local.durable"] = "false";
  switch (workload.capture) {
    case Capture::kCopy: break;  // the default
    case Capture::kDelta:
      settings["capture.mode"] = "delta";
      settings["track.method"] = "hash";
      settings["delta.full_every"] = std::to_string(kDeltaFullEvery);
      settings["delta.compact_after"] = std::to_string(workload.compact_after);
      break;
  }
  return Config::load("", settings);
}

// The store's level, as the library lays it out (rank 0); listing goes
// through `env`.
DirectoryLevel tier_of(const std::string& root, const char* store, int level,
                      std::shared_ptr<Env> env = Env::posix()) {
  return DirectoryLevel(level, root + (level == 2 ? "/l2" : "/l4"), store, 0, 0600, 0, std::move(env));
}

fault::Application application_for(const StoreSpec& spec) { return fault::Application(spec.field_values, spec.tag_bytes); }

// ------------------------------------------------------------ the recording

// A wait(version, level) that returned once `operations` were recorded.
struct Durable {
  std::size_t store;
  int version;
  int level;
  std::size_t operations;
};

// A copy damaged on purpose by the operations after the first `operations`.
struct Damaged {
  std::size_t store;
  int version;
  std::string path;
  bool whole_version;  // every copy damaged: the version is no longer restorable
  std::size_t operations;
};

struct Recording {
  std::shared_ptr<PowerLossEnv> env;
  std::vector<Durable> durable;
  std::vector<Damaged> damaged;
};

struct OpenStore {
  const StoreSpec* spec;
  fault::Application application;
  std::optional<Store> store;
};

void open_stores(const Workload& workload, const std::shared_ptr<PowerLossEnv>& env, std::vector<OpenStore>& open) {
  open.clear();
  open.reserve(workload.stores.size());  // the regions' addresses must not move
  for (const StoreSpec& spec : workload.stores) {
    open.push_back({&spec, application_for(spec), std::nullopt});
    OpenStore& entry = open.back();
    entry.store.emplace(spec.name, configure(spec, workload, kRoot), env);
    entry.application.protect(*entry.store);
  }
}

// Waits for `version` of every store at L2 (and L4 when it goes there) and
// notes when each wait returned.
void wait_for(std::vector<OpenStore>& open, int version, Recording& recording) {
  for (std::size_t s = 0; s < open.size(); ++s) {
    const StoreSpec& spec = *open[s].spec;
    open[s].store->wait(version, 2);
    recording.durable.push_back({s, version, 2, recording.env->operations()});
    if (spec.every > 0 && version % spec.every == 0) {
      open[s].store->wait(version, 4);
      recording.durable.push_back({s, version, 4, recording.env->operations()});
    }
  }
}

// Flips a bit in the middle of the workload's chosen copies of `version`.
void damage(const Workload& workload, int version, Recording& recording) {
  for (std::size_t s = 0; s < workload.stores.size(); ++s) {
    for (int level : {2, 4}) {
      if (level == 4 && workload.damage != Damage::kEveryCopy) continue;
      DirectoryLevel tier = tier_of(kRoot, workload.stores[s].name, level, recording.env);
      if (!tier.holds(version)) continue;
      // Noted before the damage: from its write on, the copy may be damaged.
      recording.damaged.push_back({s, version, tier.path(version), workload.damage == Damage::kEveryCopy,
                                   recording.env->operations()});
      recording.env->damage(tier.path(version), tier.open(version)->size() / 2);
    }
  }
}

// Runs the workload once through a fresh PowerLossEnv: version v of every
// store is checkpointed before waiting for v - 1, so writes overlap.
Recording record(const Workload& workload) {
  Recording recording{std::make_shared<PowerLossEnv>(kRoot), {}, {}};
  std::vector<OpenStore> open;
  open_stores(workload, recording.env, open);
  int waited = 0;  // every version up to this one was waited for
  for (int version = 1; version <= workload.versions; ++version) {
    for (OpenStore& entry : open) {
      entry.application.advance_to(*entry.store, version);
      entry.store->checkpoint(version);
    }
    if (version - 1 > waited) {
      waited = version - 1;
      wait_for(open, waited, recording);
    }
    if (version == workload.reopen_after) {
      waited = version;
      wait_for(open, waited, recording);
      if (workload.damage != Damage::kNone) damage(workload, version, recording);
      open_stores(workload, recording.env, open);  // closes the old stores first
      for (OpenStore& entry : open) entry.store->restart();
    }
  }
  if (waited < workload.versions) wait_for(open, workload.versions, recording);
  for (OpenStore& entry : open) entry.store->close();
  return recording;
}

// -------------------------------------------------------------- the checks

struct Tally {
  long states = 0;
  long durable_checked = 0;
  long lost = 0;
  long damaged_restored = 0;
  long damaged_visible = 0;
  long durable_copy_missing = 0;
  long restart_errors = 0;
  long skipped_copies = 0;
  long nothing_durable = 0;  // store states with no version durable yet
  long reverted_entries = 0;
  long torn_or_lost_appends = 0;
  long rewrites = 0;           // files committed over an existing name: compactions, repairs
  long cuts_in_rewrites = 0;   // states cut between such a file's creation and its rename
  // Stores with a scratch L2, which its contract allows to lose to power.
  long scratch_states = 0;        // store states checked
  long scratch_torn = 0;          // damaged or partial L2 files visible after the cut
  long scratch_torn_left = 0;     // the same, after restart
  long scratch_skipped = 0;       // copies restart skipped (included in skipped_copies)
  long scratch_older = 0;         // restored older than the newest version whose wait(v, 2) returned
  long violations() const {
    return lost + damaged_restored + damaged_visible + durable_copy_missing + restart_errors;
  }
};

// Verifies a committed file the way `resurgo verify` does: structure,
// identity, then every chunk. Returns the error, or "" when intact.
std::string verify_file(const std::string& path, const char* store, int version) {
  try {
    const std::unique_ptr<ReadableFile> file = Env::posix()->open(path);
    const format::Container container = format::read_container(*file);
    format::check_identity(container, path, store, version, 0);
    format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
    return {};
  } catch (const Error& error) {
    return error.what();
  }
}

// The damaged visible files of `store` at `level`, described. Files whose
// path, under kRoot, is `excused` were damaged on purpose.
std::vector<std::string> damaged_files(const std::string& root, const char* store, int level,
                                       const std::set<std::string>& excused = {}) {
  std::vector<std::string> errors;
  DirectoryLevel tier = tier_of(root, store, level);
  for (int version : tier.versions()) {
    if (excused.count(tier_of(kRoot, store, level).path(version))) continue;
    std::string error = verify_file(tier.path(version), store, version);
    if (!error.empty()) errors.push_back(std::move(error));
  }
  return errors;
}

// The levels whose damaged files are violations: a scratch L2's may be torn.
std::vector<int> durable_levels(const StoreSpec& spec) {
  return spec.scratch ? std::vector<int>{4} : std::vector<int>{2, 4};
}

// Counts a damaged file visible on a durable level of `spec` as a violation
// (`when`: after the power loss, or after restart), and adds the number of
// damaged files on a scratch L2 to `scratch_torn`.
void check_visible_files(const StoreSpec& spec, const std::string& root, const std::set<std::string>& excused,
                         const char* when, long& scratch_torn, Tally& tally, std::vector<std::string>& violations) {
  std::vector<std::string> errors;
  for (int level : durable_levels(spec)) {
    for (std::string& error : damaged_files(root, spec.name, level, excused)) errors.push_back(std::move(error));
  }
  if (!errors.empty()) {
    ++tally.damaged_visible;
    violations.push_back(std::string(spec.name) + ": visible damaged file " + when + ": " + errors.front());
  }
  if (spec.scratch) scratch_torn += static_cast<long>(damaged_files(root, spec.name, 2).size());
}

// The newest version of store `s` reported durable at `level` (0: any)
// before the cut, or -1.
// A version all of whose copies were damaged before the cut is no longer
// expected.
int newest_durable(const Recording& recording, std::size_t s, int level, std::size_t cut) {
  const auto destroyed = [&](int version) {
    return std::any_of(recording.damaged.begin(), recording.damaged.end(), [&](const Damaged& d) {
      return d.store == s && d.version == version && d.whole_version && d.operations < cut;
    });
  };
  int newest = -1;
  for (const Durable& d : recording.durable) {
    if (d.store == s && d.operations <= cut && (level == 0 || d.level == level) && !destroyed(d.version)) {
      newest = std::max(newest, d.version);
    }
  }
  return newest;
}

// The version restart must reach at least: the newest reported durable
// anywhere, or with a scratch L2 (whose wait(v, 2) returns unsynced) the
// newest reported durable at L4; -1 when none.
int expected_at_least(const StoreSpec& spec, const Recording& recording, std::size_t s, std::size_t cut) {
  return newest_durable(recording, s, spec.scratch ? 4 : 0, cut);
}

// The copies of store `s` damaged on purpose before the cut.
std::set<std::string> damaged_on_purpose(const Recording& recording, std::size_t s, std::size_t cut) {
  std::set<std::string> paths;
  for (const Damaged& d : recording.damaged) {
    if (d.store == s && d.operations < cut) paths.insert(d.path);
  }
  return paths;
}

// Restarts store `s` with a fresh store on the materialised state and
// checks that what it restored is the version's bytes. Returns the version
// restored, -1 for none, or nullopt when the restart failed.
std::optional<int> restart_store(const Workload& workload, std::size_t s, const std::string& root, Tally& tally,
                                 std::vector<std::string>& violations) {
  const StoreSpec& spec = workload.stores[s];
  const std::string name = std::string(spec.name) + ": ";
  fault::Application application = application_for(spec);
  int restored = -1;
  try {
    Store store(spec.name, configure(spec, workload, root), Env::posix());
    application.protect(store);
    try {
      restored = store.restart();
    } catch (const NotFoundError&) {
    } catch (const CorruptionError&) {
      // Every visible copy was damaged: reported (and counted below), and
      // the checks on visible files count the damage itself.
    }
    const long skipped = static_cast<long>(store.last_restart().skipped.size());
    tally.skipped_copies += skipped;
    if (spec.scratch) tally.scratch_skipped += skipped;
    if (restored >= 0) {
      const std::string difference = application.difference_from(store, restored);
      if (!difference.empty()) {
        ++tally.damaged_restored;
        violations.push_back(name + "restored version " + std::to_string(restored) + " but " + difference);
      }
    }
    store.close();
  } catch (const std::exception& error) {
    ++tally.restart_errors;
    violations.push_back(name + "restart failed: " + error.what());
    return std::nullopt;
  }
  return restored;
}

// Restarts store `s` on the materialised state and checks it; appends what
// is wrong to `violations`. A scratch L2 is held to its contract: its files
// may be torn or missing, so only L4 must hold what was reported durable
// there, but restart still restores intact bytes or nothing.
void check_store(const Workload& workload, std::size_t s, const Recording& recording, std::size_t cut,
                 const std::string& root, Tally& tally, std::vector<std::string>& violations) {
  const StoreSpec& spec = workload.stores[s];
  const std::string name = std::string(spec.name) + ": ";
  if (spec.scratch) ++tally.scratch_states;
  check_visible_files(spec, root, damaged_on_purpose(recording, s, cut), "after the power loss", tally.scratch_torn,
                      tally, violations);
  const int durable = expected_at_least(spec, recording, s, cut);
  if (durable < 0) ++tally.nothing_durable;
  else ++tally.durable_checked;
  const std::optional<int> restored = restart_store(workload, s, root, tally, violations);
  if (!restored) return;
  if (*restored < durable) {
    ++tally.lost;
    violations.push_back(name + "version " + std::to_string(durable) + " was reported durable but restart " +
                         (*restored < 0 ? "found nothing" : "restored " + std::to_string(*restored)));
  }
  if (spec.scratch && *restored < newest_durable(recording, s, 2, cut)) ++tally.scratch_older;
  for (int level : durable_levels(spec)) {
    const int newest = newest_durable(recording, s, level, cut);
    if (newest < 0) continue;
    const std::vector<int> held = tier_of(root, spec.name, level).versions();
    if (held.empty() || held.back() < newest) {
      ++tally.durable_copy_missing;
      violations.push_back(name + "L" + std::to_string(level) + " lost version " + std::to_string(newest) +
                           ", reported durable there");
    }
  }
  check_visible_files(spec, root, {}, "after restart", tally.scratch_torn_left, tally, violations);
}

// ------------------------------------------------------------------ driver

struct Options {
  long states;
  std::uint64_t seed;
  std::vector<Semantics> semantics;
  std::string dir;
};

// Checks one state, drawn from `state_seed`. On a violation, prints it and
// materialises the state again, untouched, for inspection.
void check_state(const Workload& workload, const Recording& recording, std::size_t cut, Semantics semantics,
                 std::uint64_t state_seed, const std::string& dir, Tally& tally, int& failures_kept) {
  const std::string state_dir = dir + "/state";
  fs::remove_all(state_dir);
  fs::create_directories(state_dir);
  std::mt19937_64 random(state_seed);
  const StateSummary summary = recording.env->materialise(cut, semantics, random, state_dir);
  ++tally.states;
  tally.reverted_entries += summary.reverted_entries;
  tally.torn_or_lost_appends += summary.torn_or_lost_appends;
  std::vector<std::string> violations;
  for (std::size_t s = 0; s < workload.stores.size(); ++s) {
    check_store(workload, s, recording, cut, state_dir, tally, violations);
  }
  if (violations.empty()) return;
  std::string kept = "not kept";
  if (failures_kept < kFailuresKept) {
    kept = dir + "/failed-" + std::to_string(failures_kept++);
    fs::create_directories(kept);
    std::mt19937_64 again(state_seed);
    recording.env->materialise(cut, semantics, again, kept);
    std::ofstream history(kept + ".history");
    history << recording.env->describe(cut);
    for (const Durable& d : recording.durable) {
      history << "wait(" << d.version << ", " << d.level << ") of " << workload.stores[d.store].name
              << " returned after operation " << d.operations << "\n";
    }
  }
  for (const std::string& violation : violations) {
    std::printf("VIOLATION %s/%s cut %zu of %zu, state seed %llu: %s [%s]\n", workload.name,
                semantics_name(semantics), cut, recording.env->operations(),
                static_cast<unsigned long long>(state_seed), violation.c_str(), kept.c_str());
  }
}

void print_summary(const Options& options, const Tally& tally, long operations) {
  std::string semantics;
  for (Semantics s : options.semantics) semantics += std::string(semantics.empty() ? "" : "+") + semantics_name(s);
  std::printf(
      "power campaign (%s, seed %llu): %ld cut states over %ld recorded operations; %ld durable versions checked, "
      "%ld lost, %ld damaged restored, %ld visible damaged files, %ld durable copies missing, %ld restart errors; "
      "%ld copies skipped by restart, %ld store states with nothing durable yet, %ld entry changes reverted, "
      "%ld appends torn or lost; %ld files rewritten in place (compactions, repairs), %ld states cut inside one\n",
      semantics.c_str(), static_cast<unsigned long long>(options.seed), tally.states, operations,
      tally.durable_checked, tally.lost, tally.damaged_restored, tally.damaged_visible, tally.durable_copy_missing,
      tally.restart_errors, tally.skipped_copies, tally.nothing_durable, tally.reverted_entries,
      tally.torn_or_lost_appends, tally.rewrites, tally.cuts_in_rewrites);
  std::printf(
      "  stores with a scratch L2 (local.durable = false): %ld store states; %ld damaged or partial L2 files visible "
      "after the cut, %ld after restart; %ld copies skipped by restart; %ld restarts older than the newest version "
      "whose wait(v, 2) returned (the contract allows it)\n",
      tally.scratch_states, tally.scratch_torn, tally.scratch_torn_left, tally.scratch_skipped, tally.scratch_older);
}

bool run_campaign(const Options& options) {
  std::mt19937_64 random(options.seed);
  const std::vector<Workload>& table = workloads();
  // Rounded up, so that at least --states states are checked.
  const long shares = static_cast<long>(table.size() * options.semantics.size());
  const long budget = (options.states + shares - 1) / shares;
  Tally tally;
  long operations = 0;
  int failures_kept = 0;
  for (const Workload& workload : table) {
    const Recording recording = record(workload);
    const std::size_t history = recording.env->operations();
    operations += static_cast<long>(history);
    // Short histories are cut at every operation in turn (at least
    // kMinStatesPerCut states each); long ones at random operations.
    const bool every_cut = static_cast<long>(history + 1) * kMinStatesPerCut <= budget;
    const std::vector<PowerLossEnv::Replacement> rewrites = recording.env->replacements();
    tally.rewrites += static_cast<long>(rewrites.size());
    for (Semantics semantics : options.semantics) {
      for (long i = 0; i < budget; ++i) {
        const std::size_t cut = every_cut ? static_cast<std::size_t>(i) % (history + 1) : random() % (history + 1);
        tally.cuts_in_rewrites += std::count_if(rewrites.begin(), rewrites.end(), [cut](const auto& rewrite) {
          return rewrite.created < cut && cut <= rewrite.renamed + 1;
        });
        check_state(workload, recording, cut, semantics, random(), options.dir, tally, failures_kept);
      }
    }
    std::printf("workload %-20s capture %-5s: %zu operations, %zu durable reports, %zu files rewritten in place, %s\n",
                workload.name, capture_name(workload.capture), history, recording.durable.size(), rewrites.size(),
                every_cut ? "cut at every operation" : "cut at random operations");
  }
  fs::remove_all(options.dir + "/state");
  print_summary(options, tally, operations);
  return tally.violations() == 0;
}

std::vector<Semantics> parse_semantics(const std::string& text) {
  if (text == "posix") return {Semantics::kPosix};
  if (text == "ordered") return {Semantics::kOrdered};
  if (text == "both") return {Semantics::kPosix, Semantics::kOrdered};
  throw std::invalid_argument("--semantics must be posix, ordered or both, not '" + text + "'");
}

}  // namespace
}  // namespace resurgo::power

int main(int argc, char** argv) {
  using namespace resurgo::power;
  return resurgo::fault::campaign_main(
      "power", argc, argv, {"--states", "--seed", "--semantics"},
      [](const resurgo::fault::Flags& flags, const std::string& dir) {
        const Options options{std::stol(flags.get("--states", "2000")),
                              std::stoull(flags.get("--seed", std::to_string(std::random_device{}()))),
                              parse_semantics(flags.get("--semantics", "both")), dir};
        return run_campaign(options);
      });
}
