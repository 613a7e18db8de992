// Crash campaign (docs/reliability.md): runs the fault Application in a child
// process, checkpointing continuously into one directory, and kills it with
// SIGKILL, either at a named crash point (core/crash_point.h; this program
// links the library built with the points enabled) or after a random delay.
// After every kill a fresh checker process restarts the store and checks:
//   - the restored version is the newest one reported durable, or newer;
//   - its bytes and metadata are exactly those of that version;
//   - every visible checkpoint file passes full verification, and no
//     temporary file outlives the checker's open of the store.
// Some trials first damage files the way a failing disk would (a flipped bit
// in the newest version, a stale temporary) so that restart's repair,
// quarantine and clean-up paths are killed too.
//
// Every trial draws its capture mode (copy, fork, auto, delta: with a
// tracking method and a chain length) with the rest of its configuration; one
// copy or delta trial in three routes versions through the memory level first
// and discards older ones as an adjoint does, and one in three protects the
// field as a device region (host backend) through an L0 cache. One trial in
// four keeps a scratch L2 (local.durable = false: nothing synced there);
// a SIGKILL leaves the page cache, so its checks are the same. Under fork
// capture the first level is written by a forked child, so the points on
// that path (write.chunk, L2.commit.*) are passed in the child. The pass count is shared with the child (crash_point.h), and a
// point that kills the child kills only the writer of one version: the
// application sees that version fail (wait() throws), reports it to the
// driver as "killed in a forked writer", and goes on checkpointing. The
// driver counts the point as reached, lets the application report one more
// durable version (the store must keep working after losing a writer), then
// kills it and checks as after any other kill. A version whose writer was
// killed was never reported durable, so the checks are unchanged; the file
// the dead child was writing is a temporary of a dead process (removed at the
// next open) or, killed after its rename, a complete version. The forked
// writer inherits the application's report pipe, so the driver's end of it
// reaches EOF only once that child is gone as well (it dies of SIGKILL with
// its parent, PR_SET_PDEATHSIG). EOF is not enough, though: a dying process
// closes its files one by one, and the writer may still hold the store's
// lock after its end of the pipe is closed. The driver is therefore a child
// subreaper (PR_SET_CHILD_SUBREAPER): an orphaned writer becomes its child,
// and it reaps every such writer before the check starts.
//
//   crash_campaign [--trials N] [--seed S] [--dir PATH]
//
// Prints a summary and exits 1 if any check failed or any crash point was
// never reached in 200 or more trials (a point that is never reached is a
// misplaced or misnamed one).
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "application.h"
#include "format/file_names.h"
#include "campaign_main.h"
#include "child_process.h"
#include "base/crash_point.h"
#include "capture/copy_capture.h"
#include "format/container.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/directory_level.h"
#include "tier/level.h"

namespace resurgo::fault {
namespace {

namespace fs = std::filesystem;

constexpr char kStore[] = "campaign";
constexpr int kReportsBeforeGivingUp = 12;  // durable versions before a point counts as not reached

// Exit codes of the children besides 0 and SIGKILL.
constexpr int kWrongBytes = 3;  // restored bytes differ, or a visible file is damaged
constexpr int kFailed = 5;      // an exception, printed on stderr

// --------------------------------------------------------------- messages

enum Kind : int { kDurable = 1, kRestored = 2, kWriterKilled = 3 };
struct Message {
  int kind;
  int version;
};

void send(int fd, Kind kind, int version) {
  const Message message{kind, version};
  send_message(fd, message);
}

// ------------------------------------------------------------ the layout

// The store's two levels, read through the library's own tier (rank 0).
struct Layout {
  std::string root;
  DirectoryLevel tier(int level) const {
    return DirectoryLevel(level, root + (level == 2 ? "/l2" : "/l4"), kStore, 0, 0600, 0, Env::posix());
  }
  std::string level_dir(int level) const { return tier(level).dir(); }
  std::string file(int level, int version) const { return tier(level).path(version); }

  // Versions with a committed file at `level`.
  std::set<int> committed(int level) const {
    const std::vector<int> versions = tier(level).versions();
    return {versions.begin(), versions.end()};
  }
  std::set<int> committed_anywhere() const {
    std::set<int> all = committed(2);
    all.merge(committed(4));
    return all;
  }
};

std::map<std::string, std::string> base_settings(const Layout& layout) {
  return {{"local.path", layout.root + "/l2"}, {"persistent.path", layout.root + "/l4"}, {"log.level", "off"}};
}

// ---------------------------------------------------------------- children

// Restarts (when there is anything) and checkpoints versions forever,
// reporting each one once it is durable at L2; dies by SIGKILL.
[[noreturn]] void run_application(const Layout& layout, const std::map<std::string, std::string>& settings,
                                  const std::string& crash_point, int hit, int report, std::size_t field_values) {
  try {
    if (!crash_point.empty()) crash_points::arm(crash_point, hit);
    Application application(field_values);
    Store store(kStore, Config::load("", settings));
    application.protect(store);
    int next = 0;
    // A version failed because the armed point killed its forked writer:
    // reported, and then the store must keep working.
    const auto writer_killed = [&](const StorageError& error, int version) {
      if (!crash_points::fired()) throw error;
      send(report, kWriterKilled, version);
    };
    try {
      const int restored = store.restart();
      const std::string difference = application.difference_from(store, restored);
      if (!difference.empty()) {
        std::fprintf(stderr, "application: restored version %d but %s\n", restored, difference.c_str());
        _exit(kWrongBytes);
      }
      send(report, kRestored, restored);
      next = restored + 1;
    } catch (const NotFoundError&) {
    }
    int previous = -1;  // the last version taken, not yet reported
    const bool discards = settings.count("memory.every") != 0;
    std::deque<int> durable;  // reported versions of this process, oldest first
    for (int version = next;; ++version) {
      application.advance_to(store, version);
      bool taken = false;
      bool reported_by_checkpoint = false;
      try {
        store.checkpoint(version);
        taken = true;
      } catch (const StorageError& error) {
        writer_killed(error, version);  // the failure of an earlier version, reported by checkpoint()
        reported_by_checkpoint = true;
      }
      if (previous >= 0) {
        try {
          store.wait(previous, 2);
          send(report, kDurable, previous);
          durable.push_back(previous);
          if (discards && durable.size() > 3) {  // the newest three stay: restart needs the newest
            store.discard(durable.front());
            durable.pop_front();
          }
        } catch (const StorageError& error) {
          // wait() names the failure of `previous` even when checkpoint() just did.
          if (!reported_by_checkpoint || !crash_points::fired()) writer_killed(error, previous);
        }
      }
      previous = taken ? version : -1;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "application (%s): %s\n", layout.root.c_str(), error.what());
  }
  _exit(kFailed);
}

// A visible file must be a complete, intact container unless the driver
// damaged it on purpose (`excused`).
std::string first_damaged_file(const Layout& layout, const std::set<std::string>& excused) {
  const std::shared_ptr<Env> env = Env::posix();
  for (int level : {2, 4}) {
    for (int version : layout.committed(level)) {
      const std::string path = layout.file(level, version);
      if (excused.count(path)) continue;
      try {
        const std::unique_ptr<ReadableFile> file = env->open(path);
        const format::Container container = format::read_container(*file);
        format::verify_chunks(*file, container, [](std::uint64_t, std::uint64_t) {});
      } catch (const Error& error) {
        return error.what();
      }
    }
  }
  return {};
}

// Restarts a fresh store and compares what it restored (-1: nothing on
// disk). Returns 0 or kWrongBytes; the store is closed on return, so that no
// thread of it outlives the checker's _exit.
int restart_and_compare(const Layout& layout, int& restored, std::size_t field_values) {
  std::map<std::string, std::string> settings = base_settings(layout);
  settings["persistent.every"] = "1";  // so that the store also tidies L4
  Application application(field_values);
  Store store(kStore, Config::load("", settings));
  application.protect(store);
  restored = -1;
  try {
    restored = store.restart();
  } catch (const NotFoundError&) {
    return 0;
  }
  const std::string difference = application.difference_from(store, restored);
  if (difference.empty()) return 0;
  std::fprintf(stderr, "checker: restored version %d but %s\n", restored, difference.c_str());
  return kWrongBytes;
}

// Checks the files a crash left behind, then restarts: that must repair or
// quarantine whatever the driver damaged.
[[noreturn]] void run_checker(const Layout& layout, const std::set<std::string>& damaged_on_purpose, int report,
                              std::size_t field_values) {
  try {
    const std::string left_damaged = first_damaged_file(layout, damaged_on_purpose);
    if (!left_damaged.empty()) {
      std::fprintf(stderr, "checker: the crash left a visible damaged file: %s\n", left_damaged.c_str());
      _exit(kWrongBytes);
    }
    int restored = -1;
    if (restart_and_compare(layout, restored, field_values) != 0) _exit(kWrongBytes);
    const std::string damaged = first_damaged_file(layout, {});
    if (!damaged.empty()) {
      std::fprintf(stderr, "checker: restart left a visible damaged file: %s\n", damaged.c_str());
      _exit(kWrongBytes);
    }
    send(report, kRestored, restored);
    _exit(0);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "checker: %s\n", error.what());
  }
  _exit(kFailed);
}

bool killed(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

// ------------------------------------------------------------------ damage

enum class Damage { kNone, kRepairable, kWholeVersion, kStaleTemporary };

void flip_middle_byte(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(0, std::ios::end);
  const std::streamoff middle = file.tellg() / 2;
  char byte = 0;
  file.seekg(middle);
  file.get(byte);
  file.seekp(middle);
  file.put(static_cast<char>(byte ^ 0x10));
}

// Flips a bit in the newest version's L2 copy after making sure an intact L4
// copy exists, made as persist() makes one (copy_with_bases: a delta's bases
// first, so that L4 never holds a delta without its chain): restart must
// restore the version from L4 and rewrite the L2 copy.
bool damage_repairably(const Layout& layout, std::set<std::string>& damaged) {
  const std::set<int> local = layout.committed(2);
  if (local.empty() || *local.rbegin() != *layout.committed_anywhere().rbegin()) return false;
  const int version = *local.rbegin();
  DirectoryLevel from = layout.tier(2);
  DirectoryLevel to = layout.tier(4);
  fs::create_directories(layout.level_dir(4));
  if (!copy_with_bases({&from, &to}, version, to)) return false;
  flip_middle_byte(layout.file(2, version));
  damaged.insert(layout.file(2, version));
  return true;
}

// Flips a bit in every copy of the newest version, when an older one exists:
// restart must quarantine it and fall back. Returns the version restart must
// now reach at least (the newest remaining one), or nullopt.
std::optional<int> damage_whole_version(const Layout& layout, std::set<std::string>& damaged) {
  const std::set<int> all = layout.committed_anywhere();
  if (all.size() < 2) return std::nullopt;
  const int version = *all.rbegin();
  for (int level : {2, 4}) {
    if (!layout.committed(level).count(version)) continue;
    flip_middle_byte(layout.file(level, version));
    damaged.insert(layout.file(level, version));
  }
  return *std::next(all.rbegin());
}

// A temporary left by a process that no longer exists.
void plant_stale_temporary(const Layout& layout, int level) {
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  fs::create_directories(layout.level_dir(level));
  std::ofstream(layout.level_dir(level) + "/." + format::container_file_name(999999, 0) + ".tmp-" + std::to_string(dead))
      << "half of a checkpoint";
}

bool has_temporary(const Layout& layout) {
  for (int level : {2, 4}) {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(layout.level_dir(level), ignored)) {
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) return true;
    }
  }
  return false;
}

// ------------------------------------------------------------------- plans

struct CrashPoint {
  const char* name;
  int max_hit;    // hits drawn from 1..max_hit
  Damage needs;   // damage that makes the point reachable
};

// Every crash point in the library; kept in sync by the "never reached" check.
constexpr CrashPoint kCrashPoints[] = {
    {"capture.copied", 6, Damage::kNone},
    {"write.chunk", 80, Damage::kNone},
    {"L2.commit.created", 6, Damage::kNone},
    {"L2.commit.written", 6, Damage::kNone},
    {"L2.commit.synced", 6, Damage::kNone},
    {"L2.commit.renamed", 6, Damage::kNone},
    {"L2.commit.done", 6, Damage::kNone},
    {"L4.commit.created", 3, Damage::kNone},
    {"L4.commit.written", 3, Damage::kNone},
    {"L4.commit.synced", 3, Damage::kNone},
    {"L4.commit.renamed", 3, Damage::kNone},
    {"L4.commit.done", 3, Damage::kNone},
    {"L2.evict.removed", 3, Damage::kNone},
    {"L2.compact.merged", 2, Damage::kNone},
    {"L4.evict.removed", 2, Damage::kNone},
    {"L2.restore.chunk", 6, Damage::kNone},
    {"L4.restore.chunk", 6, Damage::kRepairable},
    {"L2.quarantine.renamed", 1, Damage::kWholeVersion},
    {"L2.prepare.removed_temporary", 1, Damage::kStaleTemporary},
};

const char* const kCaptureModes[] = {"copy", "fork", "auto", "delta"};
const char* const kTrackMethods[] = {"auto", "mprotect", "hash"};  // soft-dirty: see docs/tracking.md

struct Trial {
  std::map<std::string, std::string> settings;
  std::string capture_mode;
  std::string crash_point;  // empty: killed by the driver after a delay
  int hit = 0;
  int reports_before_kill = 0;
  int delay_microseconds = 0;
  Damage damage = Damage::kNone;
};

template <class T, std::size_t N>
const T& pick(std::mt19937_64& random, const T (&choices)[N]) {
  return choices[random() % N];
}

Trial plan(std::mt19937_64& random, const Layout& layout, long number) {
  Trial trial;
  trial.settings = base_settings(layout);
  // 1 MiB: synchronous for the larger state, one version for the smaller;
  // 6 MiB: one larger version; 12 MiB: two.
  static const char* const kBuffers[] = {"1MiB", "6MiB", "12MiB", "auto"};
  static const char* const kChunks[] = {"64KiB", "256KiB"};
  static const char* const kCodecs[] = {"none", "lz4", "zstd", "blosc-lz4", "blosc-zstd"};
  static const char* const kThreads[] = {"1", "2", "3"};
  static const char* const kLocalKeep[] = {"1", "2", "3"};
  static const char* const kPersistentKeep[] = {"1", "2"};
  static const char* const kEvery[] = {"1", "2", "3"};
  trial.settings["buffer.capacity"] = pick(random, kBuffers);
  trial.settings["pipeline.chunk_size"] = pick(random, kChunks);
  trial.settings["pipeline.compress"] = pick(random, kCodecs);
  trial.settings["pipeline.threads"] = pick(random, kThreads);
  trial.settings["local.keep"] = pick(random, kLocalKeep);
  trial.settings["persistent.keep"] = pick(random, kPersistentKeep);
  trial.settings["persistent.every"] = pick(random, kEvery);
  // One trial in four keeps a scratch L2 (docs/config.md, local.durable):
  // its commits and removals sync nothing, which a SIGKILL cannot tell from
  // a durable L2 (the kernel keeps what was written), so the checks are
  // the same.
  if (random() % 4 == 0) trial.settings["local.durable"] = "false";
  // Three trials in five stop at a crash point, taken in turn so that each
  // is tried equally often; the others die after a random delay.
  const long point_trials = number / 5 * 3 + std::min(number % 5, 3L);
  if (number % 5 < 3) {
    const CrashPoint& point = kCrashPoints[point_trials % std::size(kCrashPoints)];
    trial.crash_point = point.name;
    trial.hit = 1 + static_cast<int>(random() % static_cast<unsigned>(point.max_hit));
    trial.damage = point.needs;
  } else {
    trial.reports_before_kill = static_cast<int>(random() % 4);
    trial.delay_microseconds = static_cast<int>(random() % 20000);
  }
  // capture.copied is passed by copy capture only: never draw fork for it;
  // compact.merged only by delta capture whose chains outgrow compact_after
  // (a version that goes to L4 is full: an L4 taking every 2nd checkpoint
  // keeps every chain at one delta).
  const bool copies = trial.crash_point == "capture.copied";
  const bool compacts = trial.crash_point == "L2.compact.merged";
  trial.capture_mode = copies ? (random() % 2 == 0 ? "copy" : "auto") : pick(random, kCaptureModes);
  if (kSanitized) trial.capture_mode = random() % 2 == 0 ? "copy" : "delta";  // see campaign_main.h
  if (compacts) {
    trial.capture_mode = "delta";
    trial.settings["persistent.every"] = random() % 2 == 0 ? "1" : "3";
  }
  trial.settings["capture.mode"] = trial.capture_mode;
  if (trial.capture_mode == "delta") {
    static const char* const kCompactAfter[] = {"0", "1", "2", "3"};
    trial.settings["track.method"] = kSanitized ? "hash" : pick(random, kTrackMethods);
    trial.settings["delta.full_every"] = std::to_string((compacts ? 4 : 2) + random() % 6);
    trial.settings["delta.compact_after"] = compacts ? "1" : pick(random, kCompactAfter);
    // A pause between chunks adds no state between the commit's steps:
    // kills after a delay land in paced compactions too, while a trial
    // aimed at compact.merged runs unpaced, so that the compaction reaches
    // the point before the trial's time is up.
    static const char* const kCompactShares[] = {"1", "0.25"};
    trial.settings["delta.compact_share"] = compacts ? "1" : pick(random, kCompactShares);
  }
  // One trial in three of the modes that can feed it keeps versions in the
  // memory level first (memory -> L2 -> L4) and discards older versions as
  // an adjoint's backward pass does (docs/adjoint.md).
  if ((trial.capture_mode == "copy" || trial.capture_mode == "delta") && random() % 3 == 0) {
    trial.settings["memory.every"] = "1";
    trial.settings["memory.keep"] = "2";
    trial.settings["memory.capacity"] = "32MiB";
  }
  // One trial in three of the modes that can take device regions protects
  // the field as one: through an L0 cache that holds a few versions, one
  // smaller than a version (every capture bypasses it), or none.
  if ((trial.capture_mode == "copy" || trial.capture_mode == "delta") && random() % 3 == 0) {
    static const char* const kDeviceCaches[] = {"12MiB", "512KiB", "0"};
    trial.settings["device.backend"] = "host";
    trial.settings["device.capacity"] = pick(random, kDeviceCaches);
    trial.settings["device.chunk"] = "1MiB";
  }
  if (trial.damage == Damage::kNone && random() % 4 == 0) {
    static const Damage kDamages[] = {Damage::kRepairable, Damage::kWholeVersion, Damage::kStaleTemporary};
    trial.damage = pick(random, kDamages);
  }
  return trial;
}

// ------------------------------------------------------------------ driver

// Trials of one capture mode.
struct ModeTally {
  long trials = 0;
  long killed_at_point = 0;     // the application, at its point
  long killed_in_writer = 0;    // a forked writer, at its point
  long killed_by_timer = 0;
  long point_not_reached = 0;
};

struct Tally {
  std::map<std::string, ModeTally> modes;
  long killed_in_writer = 0;
  long memory_route = 0;  // trials through the memory level, with discards
  long device_regions = 0;  // trials with the field a device region
  long scratch_local = 0;   // trials with local.durable = false
  long trials = 0;
  long killed_at_point = 0;
  long killed_by_timer = 0;
  long point_not_reached = 0;
  long durable_reports = 0;
  std::map<std::string, long> reached;
  std::map<Damage, long> damages;
  long lost_versions = 0;       // restored older than reported durable
  long bad_restores = 0;        // restored bytes differ from the version's
  long reader_crashes = 0;      // checker died or failed
  long other_failures = 0;      // application failed, hung or left garbage
};

class Campaign {
 public:
  Campaign(std::string root, std::uint64_t seed, const Flags& /*none of its own*/)
      : layout_{std::move(root)}, random_(seed), field_values_(kFieldValues[random_() % 2]) {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw std::runtime_error("cannot become a child subreaper");
  }

  void run_trial(long number) {
    Trial trial = plan(random_, layout_, number);
    current_ = trial;
    apply_damage(trial);
    Child application = start([&](int report) {
      run_application(layout_, trial.settings, trial.crash_point, trial.hit, report, field_values_);
    });
    bool writer_killed = false;
    const bool killed_by_driver = drive(application, trial, number, writer_killed);
    const int status = finish(application);
    reap_orphaned_writers();
    ModeTally& mode = tally_.modes[trial.capture_mode];
    ++mode.trials;
    if (trial.settings.count("memory.every") != 0) ++tally_.memory_route;
    if (trial.settings.count("device.backend") != 0) ++tally_.device_regions;
    if (trial.settings.count("local.durable") != 0) ++tally_.scratch_local;
    if (!killed(status)) {
      const bool wrong_bytes = WIFEXITED(status) && WEXITSTATUS(status) == kWrongBytes;
      fail(wrong_bytes ? tally_.bad_restores : tally_.other_failures, number, "the application " + describe(status));
    }
    if (!trial.crash_point.empty()) {
      if (writer_killed) {  // the point was reached in a forked writer; the driver killed the application after
        ++tally_.killed_in_writer;
        ++mode.killed_in_writer;
        ++tally_.reached[trial.crash_point];
      } else if (killed_by_driver) {
        ++tally_.point_not_reached;
        ++mode.point_not_reached;
      } else {
        ++tally_.killed_at_point;
        ++mode.killed_at_point;
        ++tally_.reached[trial.crash_point];
      }
    } else {
      ++tally_.killed_by_timer;
      ++mode.killed_by_timer;
    }
    check(number);
    ++tally_.trials;
  }

  bool report(double seconds, std::uint64_t seed) const {
    std::printf("crash campaign: seed %llu, %ld trials in %.1f s, directory %s\n",
                static_cast<unsigned long long>(seed), tally_.trials, seconds, layout_.root.c_str());
    std::printf("  kills at a crash point: %ld (of the application) + %ld (of a forked writer); after a random "
                "delay: %ld; point not reached (killed later): %ld\n",
                tally_.killed_at_point, tally_.killed_in_writer, tally_.killed_by_timer, tally_.point_not_reached);
    for (const char* name : kCaptureModes) {
      const auto found = tally_.modes.find(name);
      const ModeTally mode = found == tally_.modes.end() ? ModeTally{} : found->second;
      std::printf("  capture.mode %-5s %4ld trials: at a point %ld + in a writer %ld, after a delay %ld, "
                  "point not reached %ld\n",
                  name, mode.trials, mode.killed_at_point, mode.killed_in_writer, mode.killed_by_timer,
                  mode.point_not_reached);
    }
    std::printf("  through the memory level first, discarding older versions: %ld trials (a state of %zu bytes: %s)\n",
                tally_.memory_route, field_values_ * sizeof(double) + Application::kDefaultTagBytes,
                field_values_ == kFieldValues[0] ? "through the staging buffer" : "straight into memory");
    std::printf("  the field a device region through an L0 cache (host backend): %ld trials\n", tally_.device_regions);
    std::printf("  a scratch L2 (local.durable = false): %ld trials\n", tally_.scratch_local);
    std::printf("  damage before the run: repairable %ld, whole version %ld, stale temporary %ld\n",
                count(tally_.damages, Damage::kRepairable), count(tally_.damages, Damage::kWholeVersion),
                count(tally_.damages, Damage::kStaleTemporary));
    std::printf("  versions reported durable: %ld\n", tally_.durable_reports);
    bool unreached = false;
    for (const CrashPoint& point : kCrashPoints) {
      const long kills = count(tally_.reached, std::string(point.name));
      std::printf("  %-30s %ld kills\n", point.name, kills);
      unreached = unreached || kills == 0;
    }
    std::printf("  committed versions lost: %ld; damaged or partial versions restored: %ld; "
                "reader crashes: %ld; other failures: %ld\n",
                tally_.lost_versions, tally_.bad_restores, tally_.reader_crashes, tally_.other_failures);
    const bool clean = tally_.lost_versions + tally_.bad_restores + tally_.reader_crashes + tally_.other_failures == 0;
    if (unreached && tally_.trials >= 200) std::printf("  FAILED: a crash point was never reached\n");
    return clean && !(unreached && tally_.trials >= 200);
  }

 private:
  template <class Map, class Key>
  static long count(const Map& map, const Key& key) {
    const auto found = map.find(key);
    return found == map.end() ? 0 : found->second;
  }

  // Forked writers of the application just reaped were reparented to this
  // process (the subreaper); once its only child was the application, every
  // child left is such a writer, dying of PR_SET_PDEATHSIG. Reaps them all,
  // so none holds the store's lock or writes during the check.
  static void reap_orphaned_writers() {
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
  }

  // Prints the trial's draw with the failure, so that it can be run again.
  void fail(long& counter, long trial, const std::string& what) {
    ++counter;
    std::string draw = current_.crash_point.empty() ? "killed after a delay" : "point " + current_.crash_point +
                                                                                  " hit " + std::to_string(current_.hit);
    for (const auto& [key, value] : current_.settings) {
      if (key != "local.path" && key != "persistent.path" && key != "log.level") draw += ", " + key + "=" + value;
    }
    std::fprintf(stderr, "crash campaign: trial %ld: %s (%s)\n", trial, what.c_str(), draw.c_str());
  }

  void apply_damage(Trial& trial) {
    bool applied = false;
    switch (trial.damage) {
      case Damage::kNone:
        return;
      case Damage::kRepairable:
        applied = damage_repairably(layout_, damaged_on_purpose_);
        break;
      case Damage::kWholeVersion:
        if (const std::optional<int> remaining = damage_whole_version(layout_, damaged_on_purpose_)) {
          newest_durable_ = *remaining;
          applied = true;
        }
        break;
      case Damage::kStaleTemporary:
        plant_stale_temporary(layout_, 2);
        applied = true;
        break;
    }
    if (applied) ++tally_.damages[trial.damage];
  }

  // Follows the application's reports and kills it when the plan says so.
  // Returns whether the driver sent the kill; sets `writer_killed` when the
  // crash point killed a forked writer instead of the application (the
  // application is then killed once it has reported one more durable version).
  bool drive(Child& application, const Trial& trial, long number, bool& writer_killed) {
    int durable_seen = 0;
    int durable_after_writer_killed = 0;
    for (;;) {
      const bool timer_due = trial.crash_point.empty() && durable_seen >= trial.reports_before_kill;
      const bool gave_up = !trial.crash_point.empty() && durable_seen >= kReportsBeforeGivingUp;
      const bool writer_done = writer_killed && durable_after_writer_killed >= 1;
      if (timer_due || gave_up || writer_done) {
        if (timer_due) std::this_thread::sleep_for(std::chrono::microseconds(trial.delay_microseconds));
        ::kill(application.pid, SIGKILL);
        drain(application);
        return true;
      }
      Message message{};
      const Received received = receive(application.messages, message);
      if (received == Received::kEnd) return false;
      if (received == Received::kSilent) {
        fail(tally_.other_failures, number, "the application hung");
        ::kill(application.pid, SIGKILL);
        return true;
      }
      note(message);
      if (message.kind == kWriterKilled) {
        if (trial.crash_point.empty() || writer_killed) {
          fail(tally_.other_failures, number, "a forked writer was killed twice, or with no point armed");
        }
        writer_killed = true;
      }
      if (message.kind == kDurable) {
        ++durable_seen;
        if (writer_killed) ++durable_after_writer_killed;
      }
    }
  }

  // Reports sent before the kill still count.
  void drain(Child& child) {
    Message message{};
    while (receive(child.messages, message) == Received::kMessage) note(message);
  }

  void note(const Message& message) {
    if (message.kind == kDurable) {
      ++tally_.durable_reports;
      newest_durable_ = std::max(newest_durable_, message.version);
    }
  }

  void check(long number) {
    Child checker = start([&](int report) { run_checker(layout_, damaged_on_purpose_, report, field_values_); });
    damaged_on_purpose_.clear();  // the checker's restart repaired or quarantined them
    Message message{};
    const Received received = receive(checker.messages, message);
    if (received == Received::kSilent) ::kill(checker.pid, SIGKILL);
    const int status = finish(checker);
    if (received != Received::kMessage || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      long& counter = WIFSIGNALED(status)                     ? tally_.reader_crashes
                      : WEXITSTATUS(status) == kWrongBytes ? tally_.bad_restores
                                                             : tally_.other_failures;
      fail(counter, number, "the checker " + describe(status));
      return;
    }
    const int restored = message.version;
    if (restored < newest_durable_) {
      fail(tally_.lost_versions, number,
           "restored version " + std::to_string(restored) + " but version " + std::to_string(newest_durable_) +
               " had been reported durable");
    }
    if (has_temporary(layout_)) fail(tally_.other_failures, number, "a stale temporary file survived the restart");
    newest_durable_ = std::max(newest_durable_, restored);  // intact on disk: never lose it either
  }

  Layout layout_;
  std::mt19937_64 random_;
  // Every trial of a campaign restarts what the previous ones left, so the
  // state's size is drawn once per campaign: over kStraightToMemoryBytes,
  // which every route copies into the staging buffer, or under, which a
  // memory-first route writes straight into the memory level
  // (docs/adjoint.md) and the others copy into the buffer.
  static constexpr std::size_t kFieldValues[] = {kStraightToMemoryBytes / sizeof(double) + 16 * 1024, 64 * 1024};
  const std::size_t field_values_;
  int newest_durable_ = -1;
  std::set<std::string> damaged_on_purpose_;
  Tally tally_;
  Trial current_;  // the trial running, for failure messages
};

}  // namespace
}  // namespace resurgo::fault

int main(int argc, char** argv) { return resurgo::fault::trials_main<resurgo::fault::Campaign>("crash", argc, argv); }
