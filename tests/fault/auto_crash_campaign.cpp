// Crash campaign of the automatic checkpointing runtime (docs/reliability.md,
// include/resurgo/auto.hpp): SIGKILL at any point of a run that the runtime
// checkpoints by itself, and SIGTERM to a run that keeps its checkpoints only
// in memory.
//
// The application is a stencil code of six datasets (64-512 KiB, two with a
// halo ring) whose control flow follows queried values: an energy norm
// decides whether a damping loop runs, a tracer's variation how many
// smoothing sweeps follow, and the time step is a reduction. Each trial draws
// a configuration: initialisation phase or not; restore by replay, by a
// fast-forward payload (fastfw), or by a dataset list (datlist, with a
// payload or replayed up to it); a checkpoint every few loops; regions that
// time out after a few loops or may stay open for several steps; copy
// capture through the default buffer or through one smaller than the state
// (synchronous writes); L2 only or L2 and L4. One trial in six (--in-memory-every) keeps
// versions only in memory (memory.every = 1, local.every = persistent.every
// = 0) and is ended by SIGTERM: the runtime's termination flush must write
// the newest checkpoint to L2 and the process must still die by SIGTERM.
//
// A child runs the application from the start in a fresh directory, and
// reports each checkpoint once Store::wait(version, 2) returned (L1 for the
// in-memory trials); the driver kills it with SIGKILL at an armed crash point
// (core/crash_point.h, the points taken in turn) or after a random delay.
// One trial in three runs the application twice before checking: the second
// run restores what the first left (the restore.chunk point is armed there,
// and prepare.removed_temporary with a dead process's temporary planted).
// Then a fresh, unarmed checker runs the same configuration to the end and
// must restore (Runtime::last_restore) a version at least as new as the
// newest reported before the kill, by the configuration's kind of restore,
// and end with the bytes of an uninterrupted run of it (computed once per
// application shape, in a child). A run killed before its first checkpoint
// must simply run again from the start and match.
//
// The points that need damaged files (L2.quarantine.renamed,
// L4.restore.chunk) are left to crash_campaign, which damages files.
//
//   auto_crash_campaign [--trials N] [--seed S] [--dir PATH] [--in-memory-every K]
//
// --in-memory-every K: one trial in K keeps its versions in memory (default
// 6; 1 runs only those, the trials that fill and evict the memory level).
//
// Prints a summary and exits 1 if any check failed (each failure prints its
// trial's draw: rerun it with the same --seed and enough --trials) or a
// crash point armed 4 times (about 200 trials of the default mix) was never
// reached.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "auto_application.h"
#include "format/file_names.h"
#include "campaign_main.h"
#include "child_process.h"
#include "base/crash_point.h"
#include "resurgo/auto.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/directory_level.h"

namespace resurgo::fault {
namespace {

namespace fs = std::filesystem;

constexpr char kStore[] = "auto-campaign";
constexpr int kReportsBeforeGivingUp = 10;  // versions reported before an armed point counts as not reached
constexpr long kArmsBeforeUnreachedFails = 4;  // per point: 200 trials of the default mix arm each 4 times

// Exit codes of the children besides 0 and the signals.
constexpr int kWrongBytes = 3;  // the final state differs from the uninterrupted run's
constexpr int kFailed = 5;      // an exception, printed on stderr

// -------------------------------------------------------------- the draw

// One run of the application before the check.
struct Life {
  std::string crash_point;  // armed in this run; empty: killed by the driver
  int hit = 0;
  int reports_before_kill = 0;   // unarmed: killed once this many versions were reported...
  int delay_microseconds = 0;    // ...and this long after
  bool plant_temporary = false;  // a dead process's temporary is planted at L2 before the run
};

struct Trial {
  bool init_phase = false;
  Mode mode = Mode::kReplay;
  std::uint64_t interval_loops = 0;
  std::uint64_t region_timeout_loops = 0;
  bool small_buffer = false;  // smaller than the state: every checkpoint is written synchronously
  std::string chunk_size;
  bool with_l4 = false;
  int local_keep = 1;
  int persistent_every = 1;
  int persistent_keep = 1;
  bool in_memory = false;  // ended by SIGTERM
  std::vector<Life> lives;

  // The application's shape: what its uninterrupted run depends on.
  std::string shape() const { return std::string(name_of(mode)) + (init_phase ? "-init" : ""); }

  std::map<std::string, std::string> settings(const std::string& dir) const {
    std::map<std::string, std::string> settings{{"local.path", dir + "/l2"},
                                                {"persistent.path", dir + "/l4"},
                                                {"log.level", "off"},
                                                {"pipeline.chunk_size", chunk_size},
                                                {"buffer.capacity", small_buffer ? "256KiB" : "auto"}};
    if (in_memory) {
      settings.insert({{"memory.every", "1"},
                       {"memory.keep", "2"},
                       {"memory.capacity", "16MiB"},
                       {"local.every", "0"},
                       {"persistent.every", "0"}});
      return settings;
    }
    settings["local.keep"] = std::to_string(local_keep);
    settings["persistent.every"] = with_l4 ? std::to_string(persistent_every) : "0";
    settings["persistent.keep"] = std::to_string(persistent_keep);
    return settings;
  }

  autockpt::Options options() const {
    autockpt::Options options;
    options.interval_loops = interval_loops;
    options.region_timeout_loops = region_timeout_loops;
    return options;
  }

  std::string describe() const {
    std::string text = shape() + ", interval " + std::to_string(interval_loops) + " loops, region timeout " +
                       std::to_string(region_timeout_loops) + " loops, buffer " + (small_buffer ? "256KiB" : "auto") +
                       ", chunk " + chunk_size;
    if (in_memory) {
      text += ", in memory (SIGTERM)";
    } else {
      text += ", L2 keep " + std::to_string(local_keep);
      if (with_l4) {
        text += ", L4 every " + std::to_string(persistent_every) + " keep " + std::to_string(persistent_keep);
      }
    }
    for (const Life& life : lives) {
      text += life.plant_temporary ? "; stale temporary planted" : "";
      text += life.crash_point.empty() ? "; run ended after " + std::to_string(life.reports_before_kill) +
                                             " reports + " + std::to_string(life.delay_microseconds) + " us"
                                       : "; run armed at " + life.crash_point + " hit " + std::to_string(life.hit);
    }
    return text;
  }
};

// What makes a point reachable.
enum Needs : unsigned {
  kNothing = 0,
  kBufferedCopy = 1,      // copy capture through the buffer, not synchronous
  kLevel4 = 2,            // L2 and L4
  kEveryVersionToL4 = 4,  // enough L4 versions in ten reports to evict one
  kRestart = 8,           // a second run, which restores what the first left
  kStaleTemporary = 16,   // a dead process's temporary at L2 before that run
};

struct CrashPoint {
  const char* name;
  int max_hit;  // hits drawn from 1..max_hit
  unsigned needs;
};

constexpr CrashPoint kCrashPoints[] = {
    {"capture.copied", 8, kBufferedCopy},
    {"write.chunk", 80, kNothing},
    {"L2.commit.created", 8, kNothing},
    {"L2.commit.written", 8, kNothing},
    {"L2.commit.synced", 8, kNothing},
    {"L2.commit.renamed", 8, kNothing},
    {"L2.commit.done", 8, kNothing},
    {"L4.commit.created", 4, kLevel4},
    {"L4.commit.written", 4, kLevel4},
    {"L4.commit.synced", 4, kLevel4},
    {"L4.commit.renamed", 4, kLevel4},
    {"L4.commit.done", 4, kLevel4},
    {"L2.evict.removed", 4, kNothing},
    {"L4.evict.removed", 2, kLevel4 | kEveryVersionToL4},
    {"L2.restore.chunk", 4, kRestart},
    {"L2.prepare.removed_temporary", 1, kRestart | kStaleTemporary},
};

template <class T, std::size_t N>
const T& pick(std::mt19937_64& random, const T (&choices)[N]) {
  return choices[random() % N];
}

int below(std::mt19937_64& random, int bound) { return static_cast<int>(random() % static_cast<unsigned>(bound)); }

Life delayed_life(std::mt19937_64& random) {
  Life life;
  life.reports_before_kill = below(random, 4);
  life.delay_microseconds = below(random, 20000);
  return life;
}

// `point_trials` counts the trials armed so far: the points are taken in
// turn. One trial in `in_memory_every` keeps its versions in memory.
Trial plan(std::mt19937_64& random, long number, long in_memory_every, long& point_trials) {
  static const std::uint64_t kIntervals[] = {6, 12, 25, 50};
  static const std::uint64_t kShortTimeouts[] = {1, 3, 8};
  static const std::uint64_t kLongTimeouts[] = {60, 500};
  static const char* const kChunks[] = {"64KiB", "256KiB"};
  Trial trial;
  trial.init_phase = random() % 2 == 0;
  trial.mode = pick(random, kModes);
  trial.interval_loops = pick(random, kIntervals);
  trial.region_timeout_loops = random() % 2 == 0 ? pick(random, kShortTimeouts) : pick(random, kLongTimeouts);
  trial.small_buffer = random() % 2 == 0;
  trial.chunk_size = pick(random, kChunks);
  trial.with_l4 = random() % 2 == 0;
  trial.local_keep = 1 + below(random, 2);
  trial.persistent_every = 1 + below(random, 3);
  trial.persistent_keep = 1 + below(random, 2);
  trial.in_memory = number % in_memory_every == in_memory_every - 1;
  trial.lives.push_back(delayed_life(random));
  if (random() % 3 == 0) trial.lives.push_back(delayed_life(random));
  // Three of five trials on disk die at a crash point of their last run.
  if (trial.in_memory || number % 5 >= 3) return trial;
  const CrashPoint& point = kCrashPoints[point_trials++ % static_cast<long>(std::size(kCrashPoints))];
  if (point.needs & kBufferedCopy) trial.small_buffer = false;
  if (point.needs & kLevel4) trial.with_l4 = true;
  if (point.needs & kEveryVersionToL4) trial.persistent_every = 1;
  if ((point.needs & kRestart) && trial.lives.size() == 1) trial.lives.push_back(delayed_life(random));
  if (point.needs & kRestart) {
    int& first_reports = trial.lives.front().reports_before_kill;
    first_reports = std::max(first_reports, 1);  // a version to restore
  }
  Life& last = trial.lives.back();
  last.crash_point = point.name;
  last.hit = 1 + below(random, point.max_hit);
  last.plant_temporary = (point.needs & kStaleTemporary) != 0;
  return trial;
}

// --------------------------------------------------------------- messages

enum Kind : int {
  kDurable = 1,   // value: a version, durable at L2 (L1 in memory)
  kRestored = 2,  // value: the version a run restored; extra: 1 when by fast-forward
  kFinished = 3,  // the run reached its last step; value: damped steps, extra: loops
  kChecked = 4,   // the checker's restore: as kRestored, -1 when it ran from the start
};
struct Message {
  int kind;
  int value;
  int extra;
};

void send(int fd, Kind kind, int value, int extra = 0) {
  const Message message{kind, value, extra};
  send_message(fd, message);
}

// ---------------------------------------------------------------- children

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  std::vector<std::byte> bytes(file ? static_cast<std::size_t>(file.tellg()) : 0);
  file.seekg(0);
  file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw std::runtime_error("cannot read the uninterrupted run's state " + path);
  return bytes;
}

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw std::runtime_error("cannot write the uninterrupted run's state " + path);
}

// Reports each new checkpoint of the run once it is durable at `level`, one
// step after it was taken (its write overlaps that step), and the restore.
class DurableReports {
 public:
  DurableReports(Store& store, const Runtime& runtime, int level, int fd)
      : store_(store), runtime_(runtime), level_(level), fd_(fd) {}

  void after_step() {
    if (!restore_reported_ && runtime_.last_restore()) {
      send(fd_, kRestored, runtime_.last_restore()->version, runtime_.last_restore()->fast_forward ? 1 : 0);
      restore_reported_ = true;
    }
    report_pending();
    const std::optional<autockpt::CheckpointReport> newest = runtime_.last_checkpoint();
    if (newest && newest->version > taken_) pending_ = taken_ = newest->version;
  }

  void report_pending() {
    if (pending_ < 0) return;
    store_.wait(pending_, level_);
    send(fd_, kDurable, pending_);
    pending_ = -1;
  }

 private:
  Store& store_;
  const Runtime& runtime_;
  int level_;
  int fd_;
  int taken_ = -1;
  int pending_ = -1;
  bool restore_reported_ = false;
};

int first_level(const Trial& trial) { return trial.in_memory ? kL1 : kL2; }

// Runs the application from whatever `dir` holds and then waits to be
// killed, its runtime alive (a SIGTERM then still finds the flush armed).
[[noreturn]] void run_application(const Trial& trial, const Life& life, const std::string& dir, int fd) {
  try {
    if (!life.crash_point.empty()) crash_points::arm(life.crash_point, life.hit);
    Store store(kStore, Config::load("", trial.settings(dir)));
    Runtime runtime(store, trial.options());
    Simulation simulation;
    simulation.declare(runtime);
    DurableReports reports(store, runtime, first_level(trial), fd);
    simulation.run(runtime, trial.mode, trial.init_phase, [&] { reports.after_step(); });
    reports.report_pending();
    send(fd, kFinished, simulation.progress().damped, static_cast<int>(runtime.loop_index()));
    for (;;) ::pause();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "application (%s): %s\n", dir.c_str(), error.what());
  }
  _exit(kFailed);
}

struct Outcome {
  std::optional<autockpt::RestoreReport> restore;
  std::uint64_t loops = 0;
};

// Runs the configuration to its end from what `dir` holds; the store is
// closed on return, so that none of its threads outlives the child's _exit.
Outcome run_to_the_end(const Trial& trial, const autockpt::Options& options, const std::string& dir,
                       Simulation& simulation) {
  Store store(kStore, Config::load("", trial.settings(dir)));
  Runtime runtime(store, options);
  simulation.declare(runtime);
  simulation.run(runtime, trial.mode, trial.init_phase, [] {});
  store.wait(kAllVersions, first_level(trial));  // a failure of the run's own checkpoints surfaces here
  return {runtime.last_restore(), runtime.loop_index()};
}

// The uninterrupted run of the trial's shape, in `dir`, with no checkpoint:
// writes its final state to `output` and reports its control flow.
[[noreturn]] void run_reference(const Trial& trial, const std::string& dir, const std::string& output, int fd) {
  try {
    Simulation simulation;
    const autockpt::Options never;  // no interval, no trigger: no checkpoint
    const Outcome outcome = run_to_the_end(trial, never, dir, simulation);
    write_file(output, simulation.state());
    send(fd, kFinished, simulation.progress().damped, static_cast<int>(outcome.loops));
    _exit(0);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "reference run (%s): %s\n", dir.c_str(), error.what());
  }
  _exit(kFailed);
}

[[noreturn]] void run_checker(const Trial& trial, const std::string& dir, const std::string& reference, int fd) {
  try {
    Simulation simulation;
    const std::optional<autockpt::RestoreReport> restore =
        run_to_the_end(trial, trial.options(), dir, simulation).restore;
    send(fd, kChecked, restore ? restore->version : -1, restore && restore->fast_forward ? 1 : 0);
    const std::string difference = simulation.difference_from(read_file(reference));
    if (difference.empty()) _exit(0);
    std::fprintf(stderr, "checker: restored version %d; the final state differs from the uninterrupted run's: %s\n",
                 restore ? restore->version : -1, difference.c_str());
    _exit(kWrongBytes);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "checker (%s): %s\n", dir.c_str(), error.what());
  }
  _exit(kFailed);
}

bool died_of(int status, int signal) { return WIFSIGNALED(status) && WTERMSIG(status) == signal; }

// A temporary left at L2 by a process that no longer exists.
void plant_stale_temporary(const std::string& dir) {
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string level_dir = DirectoryLevel(kL2, dir + "/l2", kStore, 0, 0600, 0, Env::posix()).dir();
  fs::create_directories(level_dir);
  std::ofstream(level_dir + "/." + format::container_file_name(999999, 0) + ".tmp-" + std::to_string(dead))
      << "half of a checkpoint";
}

// ------------------------------------------------------------------ driver

// How a run ended: by itself (at its armed point, or a failure) or killed by
// the driver, which then followed it to its death (kHung: it did not die).
enum class End { kByItself, kAfterDelay, kPointNotReached, kAfterTheEnd, kHung };

struct Tally {
  long trials = 0;
  long runs = 0;
  long two_run_trials = 0;
  std::map<std::string, long> modes;
  long init_phase = 0;
  long small_buffer = 0;
  long with_l4 = 0;
  long long_regions = 0;  // region timeout of 60 loops or more
  long in_memory = 0;
  std::map<std::string, long> point_kills;
  long delay_kills = 0;
  long sigterm_kills = 0;
  long point_not_reached = 0;
  long after_the_end = 0;
  long reported = 0;
  long restored_by_replay = 0;
  long restored_by_fast_forward = 0;
  long from_the_start = 0;
  long flushed_restores = 0;      // in-memory trials whose checker restored a version the flush wrote
  long lost_versions = 0;         // restored older than reported durable
  long wrong_bytes = 0;           // the final state differs from the uninterrupted run's
  long checker_crashes = 0;       // the checker died of a signal
  long checker_failures = 0;      // the checker exited with a failure, or hung
  long application_failures = 0;  // a run failed, hung, or did not die of the planned signal
  long wrong_restore_kinds = 0;   // replay where a payload was saved, or the reverse
};

class Campaign {
 public:
  Campaign(std::string root, std::uint64_t seed, const Flags& flags)
      : root_(std::move(root)), random_(seed), in_memory_every_(std::stol(flags.get("--in-memory-every", "6"))) {
    if (in_memory_every_ < 1) throw std::invalid_argument("--in-memory-every must be 1 or more");
  }

  void run_trial(long number) {
    const Trial trial = plan(random_, number, in_memory_every_, point_trials_);
    current_ = trial;
    const std::string& expected = reference(trial);
    std::error_code ignored;
    fs::remove_all(trial_dir(), ignored);
    fs::create_directories(trial_dir());
    newest_reported_ = -1;
    count_configuration(trial);
    for (const Life& life : trial.lives) run_life(trial, life, number);
    check(trial, expected, number);
    ++tally_.trials;
  }

  bool report(double seconds, std::uint64_t seed) const {
    const Tally& t = tally_;
    std::printf("auto-crash campaign: seed %llu, %ld trials in %.1f s, directory %s\n",
                static_cast<unsigned long long>(seed), t.trials, seconds, root_.c_str());
    for (const auto& [shape, line] : references_)
      std::printf("  uninterrupted run, %s: %s\n", shape.c_str(), line.c_str());
    std::printf("  configurations:");
    for (const Mode mode : kModes) std::printf(" %s %ld", name_of(mode), count(t.modes, std::string(name_of(mode))));
    std::printf(
        "; with an initialisation phase %ld; buffer smaller than the state %ld; L2+L4 %ld; "
        "regions of 60+ loops %ld; in memory %ld\n",
        t.init_phase, t.small_buffer, t.with_l4, t.long_regions, t.in_memory);
    std::printf(
        "  application runs: %ld (%ld trials ran it twice); kills: at a crash point %ld, after a random "
        "delay %ld, SIGTERM %ld, point not reached (killed later) %ld, after its last step %ld\n",
        t.runs, t.two_run_trials, total(t.point_kills), t.delay_kills, t.sigterm_kills, t.point_not_reached,
        t.after_the_end);
    std::printf(
        "  versions reported durable: %ld; checker restores: by replay %ld, by fast-forward %ld, "
        "none (ran from the start) %ld; of the in-memory trials, %ld restored a version flushed at SIGTERM\n",
        t.reported, t.restored_by_replay, t.restored_by_fast_forward, t.from_the_start, t.flushed_restores);
    bool unreached = false;
    for (const CrashPoint& point : kCrashPoints) {
      const long kills = count(t.point_kills, std::string(point.name));
      std::printf("  %-30s %ld kills\n", point.name, kills);
      unreached = unreached || kills == 0;
    }
    std::printf(
        "  lost versions: %ld; wrong bytes: %ld; checker crashes: %ld; checker failures: %ld; "
        "application failures: %ld; wrong restore kinds: %ld\n",
        t.lost_versions, t.wrong_bytes, t.checker_crashes, t.checker_failures, t.application_failures,
        t.wrong_restore_kinds);
    // A point armed kArmsBeforeUnreachedFails times and never reached is a
    // misplaced or misnamed one (the in-memory trials arm none).
    const bool misplaced_point =
        unreached && point_trials_ >= kArmsBeforeUnreachedFails * static_cast<long>(std::size(kCrashPoints));
    if (misplaced_point) std::printf("  FAILED: a crash point was never reached\n");
    return t.lost_versions + t.wrong_bytes + t.checker_crashes + t.checker_failures + t.application_failures +
                   t.wrong_restore_kinds ==
               0 &&
           !misplaced_point;
  }

 private:
  template <class Map, class Key>
  static long count(const Map& map, const Key& key) {
    const auto found = map.find(key);
    return found == map.end() ? 0 : found->second;
  }
  static long total(const std::map<std::string, long>& map) {
    long sum = 0;
    for (const auto& entry : map) sum += entry.second;
    return sum;
  }

  std::string trial_dir() const { return root_ + "/trial"; }

  void count_configuration(const Trial& trial) {
    ++tally_.modes[name_of(trial.mode)];
    tally_.init_phase += trial.init_phase;
    tally_.small_buffer += trial.small_buffer;
    tally_.with_l4 += trial.with_l4 && !trial.in_memory;
    tally_.long_regions += trial.region_timeout_loops >= 60;
    tally_.in_memory += trial.in_memory;
    tally_.two_run_trials += trial.lives.size() > 1;
  }

  // The final state of the trial's shape run without interruption: its
  // file, computed by a child on first use.
  const std::string& reference(const Trial& trial) {
    const std::string shape = trial.shape();
    const auto known = reference_files_.find(shape);
    if (known != reference_files_.end()) return known->second;
    const std::string file = root_ + "/reference-" + shape + ".bin";
    const std::string dir = root_ + "/reference-" + shape;
    Child child = start([&](int fd) { run_reference(trial, dir, file, fd); });
    Message message{};
    const Received received = receive(child.messages, message);
    if (received == Received::kSilent) ::kill(child.pid, SIGKILL);
    const int status = finish(child);
    if (received != Received::kMessage || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw std::runtime_error("the uninterrupted run of " + shape + " " + describe(status));
    }
    references_[shape] = std::to_string(Simulation::kSteps) + " steps, " + std::to_string(message.extra) +
                         " loops, damping in " + std::to_string(message.value) + " steps";
    fs::remove_all(dir);
    return reference_files_[shape] = file;
  }

  void run_life(const Trial& trial, const Life& life, long number) {
    if (life.plant_temporary) plant_stale_temporary(trial_dir());
    Child application = start([&](int fd) { run_application(trial, life, trial_dir(), fd); });
    const End end = drive(application, trial, life, number);
    const int status = finish(application);
    ++tally_.runs;
    if (end == End::kHung) return;  // failed already
    const bool at_point = end == End::kByItself && !life.crash_point.empty();
    const int planned = trial.in_memory ? SIGTERM : SIGKILL;
    if (!died_of(status, planned) || (end == End::kByItself && !at_point)) {
      fail(tally_.application_failures, number,
           "the application " + describe(status) + " where the plan was " +
               (at_point ? "its crash point" : "signal " + std::to_string(planned) + " from the driver"));
      return;
    }
    switch (end) {
      case End::kByItself:
        ++tally_.point_kills[life.crash_point];
        break;
      case End::kAfterDelay:
        ++(trial.in_memory ? tally_.sigterm_kills : tally_.delay_kills);
        break;
      case End::kPointNotReached:
        ++tally_.point_not_reached;
        break;
      case End::kAfterTheEnd:
        ++tally_.after_the_end;
        break;
      case End::kHung:
        break;
    }
  }

  // Follows the run's reports and ends it as the plan says.
  End drive(Child& application, const Trial& trial, const Life& life, long number) {
    const int signal = trial.in_memory ? SIGTERM : SIGKILL;
    const bool armed = !life.crash_point.empty();
    int reports = 0;
    for (;;) {
      if (!armed && reports >= life.reports_before_kill) {
        std::this_thread::sleep_for(std::chrono::microseconds(life.delay_microseconds));
        return end_with(application, signal, number, End::kAfterDelay);
      }
      if (armed && reports >= kReportsBeforeGivingUp) {
        return end_with(application, signal, number, End::kPointNotReached);
      }
      Message message{};
      const Received received = receive(application.messages, message);
      if (received == Received::kEnd) return End::kByItself;
      if (received == Received::kSilent) {
        fail(tally_.application_failures, number, "the application was silent for 60 s");
        ::kill(application.pid, SIGKILL);
        return End::kHung;
      }
      note(message, number, true);
      if (message.kind == kDurable) ++reports;
      if (message.kind == kFinished) return end_with(application, signal, number, End::kAfterTheEnd);
    }
  }

  // Sends `signal` and follows the run to its end. Versions reported after
  // a SIGTERM do not count: the flush owes L2 only the newest one before it.
  End end_with(Child& application, int signal, long number, End end) {
    ::kill(application.pid, signal);
    Message message{};
    for (;;) {
      const Received received = receive(application.messages, message);
      if (received == Received::kEnd) return end;
      if (received == Received::kSilent) {
        fail(tally_.application_failures, number,
             "the application did not end within 60 s of signal " + std::to_string(signal));
        ::kill(application.pid, SIGKILL);
        return End::kHung;
      }
      note(message, number, signal == SIGKILL);
    }
  }

  void note(const Message& message, long number, bool binding) {
    if (message.kind == kDurable) {
      ++tally_.reported;
      if (binding) newest_reported_ = std::max(newest_reported_, message.value);
    }
    if (message.kind == kRestored && message.value < newest_reported_) {
      fail(tally_.lost_versions, number,
           "a restarted run restored version " + std::to_string(message.value) + " but version " +
               std::to_string(newest_reported_) + " had been reported durable");
    }
  }

  void check(const Trial& trial, const std::string& expected, long number) {
    Child checker = start([&](int fd) { run_checker(trial, trial_dir(), expected, fd); });
    Message message{};
    const Received received = receive(checker.messages, message);
    if (received == Received::kSilent) ::kill(checker.pid, SIGKILL);
    const int status = finish(checker);
    if (received == Received::kMessage) judge_restore(trial, message, number);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && received == Received::kMessage) return;
    long& counter = WIFSIGNALED(status) && received != Received::kSilent      ? tally_.checker_crashes
                    : WIFEXITED(status) && WEXITSTATUS(status) == kWrongBytes ? tally_.wrong_bytes
                                                                              : tally_.checker_failures;
    fail(counter, number, received == Received::kSilent ? "the checker hung" : "the checker " + describe(status));
  }

  void judge_restore(const Trial& trial, const Message& restored, long number) {
    if (restored.value < newest_reported_) {
      fail(tally_.lost_versions, number,
           "the checker restored " +
               (restored.value < 0 ? std::string("nothing") : "version " + std::to_string(restored.value)) +
               " but version " + std::to_string(newest_reported_) + " had been reported durable");
    }
    if (restored.value < 0) {
      ++tally_.from_the_start;
      return;
    }
    const bool fast_forward = restored.extra != 0;
    ++(fast_forward ? tally_.restored_by_fast_forward : tally_.restored_by_replay);
    tally_.flushed_restores += trial.in_memory;
    if (fast_forward != fast_forwards(trial.mode)) {
      fail(tally_.wrong_restore_kinds, number,
           std::string("the checker restored by ") + (fast_forward ? "fast-forward" : "replay") + " in " +
               name_of(trial.mode) + " mode");
    }
  }

  // Prints the trial's draw with the failure, so that it can be run again.
  void fail(long& counter, long number, const std::string& what) {
    ++counter;
    std::fprintf(stderr, "auto-crash campaign: trial %ld: %s\n  draw: %s\n", number, what.c_str(),
                 current_.describe().c_str());
  }

  std::string root_;
  std::mt19937_64 random_;
  long in_memory_every_;
  long point_trials_ = 0;
  int newest_reported_ = -1;                            // of the trial running
  Trial current_;                                       // the trial running, for failure messages
  std::map<std::string, std::string> reference_files_;  // shape -> its final state
  std::map<std::string, std::string> references_;       // shape -> its control flow, for the summary
  Tally tally_;
};

}  // namespace
}  // namespace resurgo::fault

int main(int argc, char** argv) {
  return resurgo::fault::trials_main<resurgo::fault::Campaign>("auto-crash", argc, argv, {"--in-memory-every"});
}
