// incremental: one run of bench/incremental.py (incremental checkpoints from
// write-tracked memory, issue 8), through the public C++ API only.
//
// The state is N bytes of anonymous private memory (transparent huge pages
// off: MADV_NOHUGEPAGE, so the kernel tracks 4 KiB pages), prefaulted. For
// each pattern it opens a Store on a fresh directory (local.path, L2 only,
// every version kept), protects the state, takes version 0 (always full) and
// then, for each of `intervals` intervals:
//   - writes the interval's pages into a second, untracked array of the same
//     size (the floor: the same loop with no tracker, in the same process),
//   - writes them into the state (the loop the application runs),
//   - checkpoint(i) and wait(i, L2), and prints the version's stats.
// With --restart it then closes the store, opens a new one on the same
// directory (as a restarted process would) protecting a third, touched array,
// restores the newest version, and checks it is that version and equals the
// state bit for bit (the "restart" line says whether it did).
// Before the restart, each store prints the bytes the process wrote from its
// first delta to the store's close, which waits for the compactions
// ("traffic" line; --compact-after N sets delta.compact_after, default 0:
// never, whatever the library's default).
// With --one-store every pattern goes to one store after one version 0
// (the fixed-granularity sweep: no full version per pattern).
//
// Patterns (PATTERN:FRACTION of the pages per interval; fixed seeds, so every
// run writes the same pages at the same interval):
//   scattered  random pages, a new draw each interval; one 8-byte store each
//   strided    every k-th page, k = round(1 / FRACTION); one 8-byte store each
//   slab       1 MiB slabs of whole pages at random (unaligned) page offsets,
//              a new draw each interval; every 8-byte word incremented
//   himeno     a 3-D float array of Himeno "L" planes (257 x 513 floats,
//              527,364 bytes: not a whole number of pages) updated slice by
//              slice; each interval rewrites every float of the next
//              FRACTION of the slices, wrapping around
// One 8-byte store per page is the tracking worst case (a fault per page
// for almost no work); slabs and slices are written whole.
//
// With --compaction-cost it measures compaction's own cost instead
// (docs/tracking.md, "Compaction"): one store with delta.compact_after =
// intervals - 1 takes --compaction-cycles chains of --intervals deltas of
// the first pattern, one after the other, so that the newest version of
// each is compacted in the background once durable. In each cycle the
// application loop runs in fixed slices (one sweep of a 32 MiB array each):
// kBaselineSlices slices just before the chain's newest checkpoint, then
// until the compaction has put the full version in place of the delta, then
// kBaselineSlices more. The windows without compaction bracket the one with
// it, a second or so apart: on a shared machine whose load changes by the
// second, a baseline taken further away says little about this window. It
// prints per cycle the loop's seconds and CPU seconds in both, the
// background threads' CPU seconds (process CPU less the application
// thread's) and the eviction thread's ("compaction" lines).
//
// Output: one JSON object per line on stdout ("interval", "traffic",
// "restart", "compaction"). Exit
// status 3 and "unavailable: REASON" on stderr when the store refuses the
// tracking method (the library's message).
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "resurgo/resurgo.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRegion = 0;
constexpr std::uint64_t kSeed = 20240611;
constexpr std::size_t kSlabBytes = std::size_t{1} << 20;
constexpr std::size_t kHimenoPlaneBytes = std::size_t{257} * 513 * sizeof(float);

struct Pattern {
  std::string kind;  // scattered | strided | slab | himeno
  double fraction = 0;
  std::string name() const {
    std::ostringstream out;
    out << kind << ':' << fraction;
    return out.str();
  }
};

struct Options {
  std::string dir;
  std::size_t size = std::size_t{64} << 20;
  std::string mode = "delta";
  std::string method = "auto";
  std::string granularity = "auto";
  std::vector<Pattern> patterns;
  int intervals = 10;
  int full_every = 0;  // 0: one full version, then every delta of the store
  bool restart = false;
  bool one_store = false;
  bool compaction_cost = false;
  int compaction_cycles = 1;
  int compact_after = 0;  // delta.compact_after of the chains (--compact-after)
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "incremental: %s\n"
               "usage: incremental --dir DIR [--size BYTES] [--mode copy|delta] [--method M]\n"
               "                   [--granularity auto|SIZE] --patterns KIND:FRACTION[,...]\n"
               "                   [--intervals N] [--full-every N] [--restart] [--one-store]\n"
               "                   [--compact-after N] [--compaction-cost [--compaction-cycles N]]\n"
               "  KIND: scattered | strided | slab | himeno; FRACTION in (0, 1]\n",
               why.c_str());
  std::exit(64);
}

long at_least(const std::string& flag, const std::string& value, long minimum) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (*end != '\0' || n < minimum) usage(flag + " takes an integer of at least " + std::to_string(minimum));
  return n;
}

std::vector<Pattern> parse_patterns(const std::string& text) {
  std::vector<Pattern> patterns;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::size_t colon = item.find(':');
    if (colon == std::string::npos) usage("pattern '" + item + "' is not KIND:FRACTION");
    Pattern pattern{item.substr(0, colon), 0};
    char* end = nullptr;
    pattern.fraction = std::strtod(item.c_str() + colon + 1, &end);
    if (*end != '\0' || !(pattern.fraction > 0 && pattern.fraction <= 1)) {
      usage("pattern '" + item + "': the fraction must be in (0, 1]");
    }
    if (pattern.kind != "scattered" && pattern.kind != "strided" && pattern.kind != "slab" &&
        pattern.kind != "himeno") {
      usage("unknown pattern kind '" + pattern.kind + "'");
    }
    patterns.push_back(pattern);
  }
  if (patterns.empty()) usage("--patterns names no pattern");
  return patterns;
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--restart") {
      opt.restart = true;
      continue;
    }
    if (arg == "--one-store") {
      opt.one_store = true;
      continue;
    }
    if (arg == "--compaction-cost") {
      opt.compaction_cost = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--dir") {
      opt.dir = value;
    } else if (arg == "--size") {
      char* end = nullptr;
      const unsigned long long size = std::strtoull(value.c_str(), &end, 10);
      if (*end != '\0' || size == 0) usage("--size takes a positive number of bytes");
      opt.size = static_cast<std::size_t>(size);
    } else if (arg == "--mode") {
      if (value != "copy" && value != "delta") usage("--mode is copy or delta");
      opt.mode = value;
    } else if (arg == "--method") {
      opt.method = value;
    } else if (arg == "--granularity") {
      opt.granularity = value;
    } else if (arg == "--patterns") {
      opt.patterns = parse_patterns(value);
    } else if (arg == "--intervals") {
      opt.intervals = static_cast<int>(at_least(arg, value, 1));
    } else if (arg == "--compaction-cycles") {
      opt.compaction_cycles = static_cast<int>(at_least(arg, value, 1));
    } else if (arg == "--compact-after") {
      opt.compact_after = static_cast<int>(at_least(arg, value, 0));
    } else if (arg == "--full-every") {
      opt.full_every = static_cast<int>(at_least(arg, value, 1));
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (opt.dir.empty()) usage("--dir is required");
  if (opt.patterns.empty()) usage("--patterns is required");
  if (opt.one_store && opt.restart) usage("--restart needs one store per pattern (no --one-store)");
  if (opt.compaction_cost && (opt.one_store || opt.restart || opt.mode != "delta")) {
    usage("--compaction-cost takes delta mode, without --restart or --one-store");
  }
  if (opt.compaction_cost && opt.compact_after > 0) usage("--compaction-cost sets delta.compact_after itself");
  return opt;
}

// ------------------------------------------------------------------ memory
class Mapping {
 public:
  explicit Mapping(std::size_t bytes) : bytes_(bytes) {
    void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    base_ = static_cast<std::byte*>(mapped);
    if (madvise(base_, bytes, MADV_NOHUGEPAGE) != 0) {
      throw std::runtime_error(std::string("madvise(MADV_NOHUGEPAGE): ") + std::strerror(errno));
    }
    std::memset(base_, 1, bytes);  // prefault; not zero, so a lost restore shows
  }
  ~Mapping() { munmap(base_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::byte* data() const { return base_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_;
};

// ---------------------------------------------------------------- patterns
// What one interval writes: byte ranges, ascending and disjoint. Word ranges
// take 8-byte increments (scattered, strided: one word; slabs: whole pages),
// float ranges take += 1 on every float (Himeno slices).
struct Writes {
  bool floats = false;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // offset, bytes
};

std::mt19937_64 rng_for(const Pattern& pattern, int interval) {
  std::uint64_t name_hash = 14695981039346656037ull;  // FNV-1a: the same seed on every platform
  for (char c : pattern.name()) name_hash = (name_hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  std::seed_seq seq{kSeed, name_hash, static_cast<std::uint64_t>(interval)};
  return std::mt19937_64(seq);
}

std::size_t share(double fraction, std::size_t of) {
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::llround(fraction * static_cast<double>(of))), 1, of);
}

// `count` distinct values of [0, n), ascending (partial Fisher-Yates).
std::vector<std::size_t> sample(std::size_t n, std::size_t count, std::mt19937_64& rng) {
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i) all[i] = i;
  for (std::size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng() % (n - i)]);
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

Writes pattern_writes(const Pattern& pattern, int interval, std::size_t size, std::size_t page) {
  Writes writes;
  const std::size_t pages = size / page;
  std::mt19937_64 rng = rng_for(pattern, interval);
  if (pattern.kind == "scattered") {
    for (std::size_t p : sample(pages, share(pattern.fraction, pages), rng)) writes.ranges.emplace_back(p * page, 8);
  } else if (pattern.kind == "strided") {
    const std::size_t stride = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(1 / pattern.fraction)));
    for (std::size_t p = 0; p < pages; p += stride) writes.ranges.emplace_back(p * page, 8);
  } else if (pattern.kind == "slab") {
    // Uniformly placed disjoint slabs: `count` cut points in the free pages,
    // slab j starting at the j-th cut plus the j slabs before it.
    const std::size_t slab_pages = std::min(kSlabBytes / page, pages);
    const std::size_t count = std::min(share(pattern.fraction, pages / slab_pages), pages / slab_pages);
    const std::size_t free_pages = pages - count * slab_pages;
    std::vector<std::size_t> cuts(count);
    for (std::size_t& cut : cuts) cut = rng() % (free_pages + 1);
    std::sort(cuts.begin(), cuts.end());
    for (std::size_t j = 0; j < count; ++j) writes.ranges.emplace_back((cuts[j] + j * slab_pages) * page, slab_pages * page);
  } else {  // himeno
    writes.floats = true;
    const std::size_t planes = std::max<std::size_t>(1, size / kHimenoPlaneBytes);
    const std::size_t plane_bytes = std::min(kHimenoPlaneBytes, size);
    const std::size_t count = share(pattern.fraction, planes);
    const std::size_t first = (static_cast<std::size_t>(interval - 1) * count) % planes;
    const std::size_t head = std::min(count, planes - first);  // up to the last plane, then wrap
    if (count > head) writes.ranges.emplace_back(0, (count - head) * plane_bytes);
    writes.ranges.emplace_back(first * plane_bytes, head * plane_bytes);
  }
  return writes;
}

std::size_t pages_touched(const Writes& writes, std::size_t page) {
  std::size_t pages = 0, next_free = 0;  // ranges are ascending and disjoint
  for (const auto& [offset, bytes] : writes.ranges) {
    const std::size_t first = std::max(offset / page, next_free);
    const std::size_t end = (offset + bytes + page - 1) / page;
    if (end > first) pages += end - first;
    next_free = std::max(next_free, end);
  }
  return pages;
}

// The application's loop. Not inlined, so both calls run the same code.
__attribute__((noinline)) void apply(std::byte* base, const Writes& writes) {
  for (const auto& [offset, bytes] : writes.ranges) {
    if (writes.floats) {
      float* values = reinterpret_cast<float*>(base + offset);
      for (std::size_t i = 0; i < bytes / sizeof(float); ++i) values[i] += 1.0f;
    } else {
      std::uint64_t* words = reinterpret_cast<std::uint64_t*>(base + offset);
      for (std::size_t i = 0; i < bytes / sizeof(std::uint64_t); ++i) words[i] += 1;
    }
  }
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// ------------------------------------------------------------------ stores
resurgo::Config store_config(const Options& opt, const std::string& path) {
  std::map<std::string, std::string> overrides = {
      {"local.path", path},
      {"local.keep", "0"},  // every version of the chain stays
      {"persistent.every", "0"},
      {"buffer.capacity", std::to_string(opt.size)},
      {"capture.mode", opt.mode},
  };
  if (opt.mode == "delta") {
    overrides["track.method"] = opt.method;
    overrides["track.granularity"] = opt.granularity;
    // Default: every delta of the run hangs off version 0's chain (one chain per pattern, or one in all).
    const std::size_t deltas = static_cast<std::size_t>(opt.intervals) * (opt.one_store ? opt.patterns.size() : 1);
    overrides["delta.full_every"] = std::to_string(opt.full_every > 0 ? static_cast<std::size_t>(opt.full_every)
                                                                       : deltas + 1);
    overrides["delta.compact_after"] = std::to_string(opt.compact_after);
  }
  return resurgo::Config::load("", overrides);
}

resurgo::VersionStats version_stats(resurgo::Store& store, int version) {
  for (const resurgo::VersionStats& stats : store.stats()) {
    if (stats.version == version) return stats;
  }
  throw std::runtime_error("no stats for version " + std::to_string(version));
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

void print_version(const Options& opt, const Pattern& pattern, int interval, const resurgo::VersionStats& stats,
                   std::size_t true_dirty, double floor_seconds, double write_seconds) {
  const resurgo::LevelStats* l2 = stats.at(resurgo::kL2);
  std::printf(
      "{\"kind\": \"interval\", \"mode\": \"%s\", \"method\": \"%s\", \"granularity\": \"%s\", \"pattern\": %s, "
      "\"interval\": %d, \"version\": %d, \"state_bytes\": %zu, \"true_dirty_bytes\": %zu, "
      "\"floor_seconds\": %.9e, \"write_seconds\": %.9e, \"blocking_seconds\": %.9e, \"durable_seconds\": %.9e, "
      "\"stored_bytes\": %" PRIu64 ", \"capture\": %s, \"base_version\": %d, \"dirty_bytes\": %" PRIu64
      ", \"captured_bytes\": %" PRIu64 ", \"granularity_bytes\": %" PRIu64 ", \"tracker\": %s}\n",
      opt.mode.c_str(), opt.method.c_str(), opt.granularity.c_str(), json_string(pattern.name()).c_str(), interval,
      stats.version, opt.size, true_dirty, floor_seconds, write_seconds, stats.blocking_seconds,
      l2 ? l2->seconds_to_level : -1.0, l2 ? l2->stored_bytes : 0, json_string(stats.capture).c_str(),
      stats.base_version, stats.dirty_bytes, stats.captured_bytes, stats.granularity_bytes,
      json_string(stats.tracker).c_str());
  std::fflush(stdout);
}

// The process's I/O counters (/proc/self/io, every thread's): `write_bytes`,
// the bytes it dirtied in the page cache or sent to the disk (what the files
// put on the disk), and `wchar`, the bytes passed to write calls.
struct IoCounters {
  std::uint64_t write_bytes = 0;
  std::uint64_t wchar = 0;
};

IoCounters io_counters() {
  IoCounters counters;
  std::ifstream io("/proc/self/io");
  std::string name;
  std::uint64_t value = 0;
  while (io >> name >> value) {
    if (name == "write_bytes:") counters.write_bytes = value;
    if (name == "wchar:") counters.wchar = value;
  }
  return counters;
}

// What one chain's deltas wrote, from the first delta to the store's close
// (which waits for the background work, compactions included).
void print_traffic(const Options& opt, const Pattern& pattern, const IoCounters& before, const IoCounters& after) {
  std::printf(
      "{\"kind\": \"traffic\", \"mode\": \"%s\", \"method\": \"%s\", \"pattern\": %s, \"deltas\": %d, "
      "\"compact_after\": %d, \"write_bytes\": %" PRIu64 ", \"wchar\": %" PRIu64 "}\n",
      opt.mode.c_str(), opt.method.c_str(), json_string(pattern.name()).c_str(), opt.intervals, opt.compact_after,
      after.write_bytes - before.write_bytes, after.wchar - before.wchar);
  std::fflush(stdout);
}

// Restores the newest version into `into` from a new store and prints how
// long it took. A restore that is not the newest version bit for bit is
// reported ("verified": false, with the library's lines on what it skipped)
// and gets no throughput in the report.
void restore(const Options& opt, const Pattern& pattern, const std::string& path, int newest,
             const Mapping& state, const Mapping& into) {
  std::memset(into.data(), 0, opt.size);  // nothing of a previous restore survives
  resurgo::Store store("incremental", store_config(opt, path));
  store.protect(kRegion, into.data(), opt.size, "state");
  const Clock::time_point start = Clock::now();
  const int version = store.restart();
  const double seconds = seconds_since(start);
  const resurgo::RestartReport report = store.last_restart();
  const bool verified = version == newest && std::memcmp(into.data(), state.data(), opt.size) == 0;
  std::string skipped;
  for (const std::string& line : report.skipped) skipped += (skipped.empty() ? "" : ", ") + json_string(line);
  std::printf(
      "{\"kind\": \"restart\", \"mode\": \"%s\", \"method\": \"%s\", \"granularity\": \"%s\", \"pattern\": %s, "
      "\"newest\": %d, \"version\": %d, \"verified\": %s, \"state_bytes\": %zu, \"seconds\": %.9e, "
      "\"report_seconds\": %.9e, \"level\": %d, \"links_read\": %zu, \"skipped\": [%s]}\n",
      opt.mode.c_str(), opt.method.c_str(), opt.granularity.c_str(), json_string(pattern.name()).c_str(), newest,
      version, verified ? "true" : "false", opt.size, seconds, report.seconds, report.level, report.chain.size(),
      skipped.c_str());
  std::fflush(stdout);
  store.close();
}

class Session {
 public:
  explicit Session(const Options& opt) : opt_(opt), page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
                                         state_(opt.size), floor_(opt.size) {}

  void run() {
    if (opt_.one_store) {
      Chain chain(*this, opt_.dir + "/all");
      for (const Pattern& pattern : opt_.patterns) chain.intervals(pattern);
      chain.close();
      return;
    }
    std::unique_ptr<Mapping> restored;
    if (opt_.restart) restored = std::make_unique<Mapping>(opt_.size);
    for (std::size_t i = 0; i < opt_.patterns.size(); ++i) {
      const std::string path = opt_.dir + "/p" + std::to_string(i);
      {
        Chain chain(*this, path);
        const IoCounters before = io_counters();
        chain.intervals(opt_.patterns[i]);
        chain.close();
        print_traffic(opt_, opt_.patterns[i], before, io_counters());
      }
      if (restored) restore(opt_, opt_.patterns[i], path, opt_.intervals, state_, *restored);
      std::filesystem::remove_all(path);
    }
  }

 private:
  // One store from its version 0 (full) to close.
  class Chain {
   public:
    Chain(Session& session, const std::string& path)
        : session_(session), store_("incremental", store_config(session.opt_, path)) {
      store_.protect(kRegion, session.state_.data(), session.opt_.size, "state");
      store_.checkpoint(0);
      store_.wait(0, resurgo::kL2);
    }
    void close() { store_.close(); }

    void intervals(const Pattern& pattern) {
      for (int interval = 1; interval <= session_.opt_.intervals; ++interval) {
        const Writes writes = pattern_writes(pattern, interval, session_.opt_.size, session_.page_);
        Clock::time_point start = Clock::now();
        apply(session_.floor_.data(), writes);
        const double floor_seconds = seconds_since(start);
        start = Clock::now();
        apply(session_.state_.data(), writes);
        const double write_seconds = seconds_since(start);
        const int version = ++version_;
        store_.checkpoint(version);
        store_.wait(version, resurgo::kL2);
        print_version(session_.opt_, pattern, interval, version_stats(store_, version),
                      pages_touched(writes, session_.page_) * session_.page_, floor_seconds, write_seconds);
      }
    }

   private:
    Session& session_;
    resurgo::Store store_;
    int version_ = 0;
  };

  const Options& opt_;
  std::size_t page_;
  Mapping state_;
  Mapping floor_;
};

// ------------------------------------------------------ compaction's cost
constexpr std::size_t kLoopValues = (std::size_t{32} << 20) / sizeof(double);  // the application loop's array
constexpr std::size_t kBaselineSlices = 200;  // on each side of a compaction: 0.3 s or so here
constexpr double kCompactionLimitSeconds = 300;  // a compaction that never shows stops the run

// One slice of the application's loop: a memory-bound sweep over its own
// array (not the protected state), the same work every time. Aligned to a
// cache line so that its loop lies in one whatever the rest of the program:
// a build whose loop straddled two lines ran it markedly slower with nothing
// in the background (exploratory runs), which made two builds' slowdowns
// incomparable.
__attribute__((noinline, aligned(64))) void loop_slice(std::vector<double>& values) {
  for (double& value : values) value = value * 0.999 + 1.0;
}

double seconds_of(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) * 1e-6;
}

double thread_cpu_seconds() {
  timespec own{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &own);
  return static_cast<double>(own.tv_sec) + static_cast<double>(own.tv_nsec) * 1e-9;
}

// CPU seconds of every thread but the calling (application) one.
double background_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime) - thread_cpu_seconds();
}

// CPU seconds of the library's eviction thread (named "rsg evict"), which
// runs the compactions; 0 when there is none.
double eviction_thread_cpu_seconds() {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string name;
    std::getline(std::ifstream(task.path() / "comm"), name);
    if (name != "rsg evict") continue;
    double nanoseconds = 0;
    std::ifstream(task.path() / "schedstat") >> nanoseconds;  // first field: time on a CPU
    return nanoseconds * 1e-9;
  }
  return 0;
}

// Whether the file of `version` in the store "incremental" at `path` (the
// library's layout: one directory per store, v<10 digits>.r<rank>.rsg) holds
// a full version: uncompressed, it is at least as large as the state, a
// delta of a few intervals' pages far smaller.
bool full_version_in_place(const std::string& path, int version, std::size_t state_bytes) {
  char name[64];
  std::snprintf(name, sizeof name, "/incremental/v%010d.r000000.rsg", version);
  std::error_code error;
  const std::uintmax_t bytes = std::filesystem::file_size(path + name, error);
  return !error && bytes >= state_bytes;
}

class CompactionCost {
 public:
  explicit CompactionCost(const Options& opt)
      : opt_(opt), page_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))), state_(opt.size), loop_(kLoopValues, 1.0) {}

  void run() {
    const std::string path = opt_.dir + "/compacting";
    Options store_options = opt_;
    store_options.compact_after = opt_.intervals - 1;
    store_options.full_every = opt_.intervals * opt_.compaction_cycles + 1;  // every cycle's chain is deltas
    {
      resurgo::Store store("incremental", store_config(store_options, path));
      store.protect(kRegion, state_.data(), opt_.size, "state");
      checkpoint(store, 0);
      for (int cycle = 0; cycle < opt_.compaction_cycles; ++cycle) measure(store, cycle);
    }
    std::filesystem::remove_all(path);
  }

 private:
  struct Window {
    std::size_t slices = 0;
    double seconds = 0;
    double cpu_seconds = 0;         // the application thread's
    double background_seconds = 0;  // CPU of every other thread
    double eviction_seconds = 0;    // CPU of the eviction thread
  };

  void checkpoint(resurgo::Store& store, int version) {
    if (version > 0) {
      const Writes writes = pattern_writes(opt_.patterns[0], version, opt_.size, page_);
      apply(state_.data(), writes);  // an lvalue: a temporary would pick std::apply by ADL
    }
    store.checkpoint(version);
    store.wait(version, resurgo::kL2);
  }

  // Slices of the loop until `done` says the window is over.
  template <typename Done>
  Window loop(Done done) {
    Window window;
    const double background = background_cpu_seconds();
    const double eviction = eviction_thread_cpu_seconds();
    const double cpu = thread_cpu_seconds();
    const Clock::time_point start = Clock::now();
    while (!done(window.slices)) {
      loop_slice(loop_);
      ++window.slices;
      if (seconds_since(start) > kCompactionLimitSeconds) throw std::runtime_error("the compaction never finished");
    }
    window.seconds = seconds_since(start);
    window.cpu_seconds = thread_cpu_seconds() - cpu;
    window.background_seconds = background_cpu_seconds() - background;
    window.eviction_seconds = eviction_thread_cpu_seconds() - eviction;
    return window;
  }

  // The deltas of one chain, the last of them compacted; the loop around it.
  void measure(resurgo::Store& store, int cycle) {
    const std::string path = opt_.dir + "/compacting";
    const int newest = (cycle + 1) * opt_.intervals;
    for (int version = cycle * opt_.intervals + 1; version < newest; ++version) checkpoint(store, version);
    const auto baseline = [](std::size_t slices) { return slices >= kBaselineSlices; };
    const Window before = loop(baseline);
    checkpoint(store, newest);
    const Clock::time_point start = Clock::now();
    double compaction_seconds = -1;
    const Window during = loop([&](std::size_t slices) {
      if (slices > 0 && full_version_in_place(path, newest, opt_.size)) compaction_seconds = seconds_since(start);
      return compaction_seconds >= 0;
    });
    const Window after = loop(baseline);
    std::printf(
        "{\"kind\": \"compaction\", \"cycle\": %d, \"pattern\": %s, \"state_bytes\": %zu, \"deltas\": %d, "
        "\"slices\": %zu, \"loop_seconds\": %.9e, \"loop_cpu_seconds\": %.9e, \"compaction_seconds\": %.9e, "
        "\"background_cpu_seconds\": %.9e, \"eviction_thread_cpu_seconds\": %.9e, \"baseline_slices\": %zu, "
        "\"baseline_seconds\": %.9e, \"baseline_cpu_seconds\": %.9e, \"baseline_background_cpu_seconds\": %.9e}\n",
        cycle, json_string(opt_.patterns[0].name()).c_str(), opt_.size, opt_.intervals, during.slices,
        during.seconds, during.cpu_seconds, compaction_seconds, during.background_seconds, during.eviction_seconds,
        before.slices + after.slices, before.seconds + after.seconds, before.cpu_seconds + after.cpu_seconds,
        before.background_seconds + after.background_seconds);
    std::fflush(stdout);
  }

  const Options& opt_;
  std::size_t page_;
  Mapping state_;
  std::vector<double> loop_;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  try {
    if (opt.compaction_cost) {
      CompactionCost(opt).run();
      return 0;
    }
    Session(opt).run();
    return 0;
  } catch (const resurgo::ConfigError& error) {
    // The store refuses a method this kernel lacks with the library's reason.
    const bool unavailable = std::string_view(error.what()).find("not available here") != std::string_view::npos;
    std::fprintf(stderr, "%s: %s\n", unavailable ? "unavailable" : "incremental", error.what());
    return unavailable ? 3 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "incremental: %s\n", error.what());
    return 1;
  }
}
