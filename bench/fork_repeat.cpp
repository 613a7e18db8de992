// fork_repeat: one run of bench/fork_repeat.py (issue 33, part 3): the
// blocking of a store's first fork against its later ones, with the
// collapse of the huge pages a child split (capture/huge_page_collapse.h) on
// or off, and how much the application slows down meanwhile.
//
// The state is N bytes of anonymous private memory aligned to the huge page
// size, advised MADV_HUGEPAGE (as NumPy advises its large arrays) unless
// --advise none, and written whole (float32). The application's step
// negates a rotating tenth of it in place (memory-bound; every page of the
// tenth written). The run:
//   - two sweeps of steps (ten steps each); the second's mean step time is
//     the baseline (no child, no collapse);
//   - --forks times: the state's AnonHugePages (smaps, untimed), then
//     checkpoint(v) (the blocking, and the CPU time it took this thread), steps until wait(v, L2) returns in
//     another thread (the child writes; copy on write), then steps for
//     --interval seconds (the collapse pass runs, when on).
// A store of its own on --dir: capture.mode = "fork", L2 only, one version
// kept, no compression, logging off unless --log.
//
// Output: one JSON object per line on stdout: "start" (the baseline), one
// "fork" per fork, "end" (the collapse passes of the run).
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "capture/huge_page_collapse.h"
#include "capture/mappings.h"
#include "resurgo/resurgo.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSweepSteps = 10;

struct Options {
  std::string dir;
  std::uint64_t bytes = 1ull << 30;
  int forks = 4;
  bool collapse = true;
  bool advise_huge_pages = true;
  double interval_seconds = 3;
  std::string log_level = "off";  // "debug": a line per collapse pass, on stderr
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU time of the calling thread: what checkpoint() costs it, without the
// time it waits for the child to be scheduled (on a loaded machine,
// milliseconds that say nothing of the page tables).
double thread_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "fork_repeat: %s\nusage: fork_repeat --dir DIR [--bytes N] [--forks K] [--collapse on|off] "
               "[--advise hugepage|none] [--interval SECONDS] [--log LEVEL]\n",
               why);
  std::exit(64);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) usage(("no value after " + key).c_str());
    const std::string value = argv[++i];
    if (key == "--dir") {
      options.dir = value;
    } else if (key == "--bytes") {
      options.bytes = std::stoull(value);
    } else if (key == "--forks") {
      options.forks = std::stoi(value);
    } else if (key == "--collapse") {
      options.collapse = value == "on";
    } else if (key == "--advise") {
      options.advise_huge_pages = value == "hugepage";
    } else if (key == "--interval") {
      options.interval_seconds = std::stod(value);
    } else if (key == "--log") {
      options.log_level = value;
    } else {
      usage(("unknown option " + key).c_str());
    }
  }
  if (options.dir.empty()) usage("--dir is required");
  return options;
}

class State {
 public:
  explicit State(const Options& options) : bytes_(options.bytes) {
    const std::uint64_t huge = resurgo::huge_page_bytes() > 0 ? resurgo::huge_page_bytes() : 4096;
    mapped_bytes_ = bytes_ + huge;
    mapped_ = ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped_ == MAP_FAILED) throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
    data_ = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(mapped_) + huge - 1) / huge * huge);
    ::madvise(data_, bytes_, options.advise_huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (std::uint64_t i = 0; i < count(); ++i) data_[i] = static_cast<float>(i % 4096) * 0.25f;
  }
  ~State() { ::munmap(mapped_, mapped_bytes_); }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  float* data() const { return data_; }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t count() const { return bytes_ / sizeof(float); }

  // The application's step: negates the next tenth; returns its seconds.
  double step() {
    const std::uint64_t slice = (count() + kSweepSteps - 1) / kSweepSteps;
    const std::uint64_t begin = (next_++ % kSweepSteps) * slice;
    const std::uint64_t end = std::min(count(), begin + slice);
    const Clock::time_point started = Clock::now();
    for (std::uint64_t i = begin; i < end; ++i) data_[i] = -data_[i];
    return seconds_since(started);
  }

 private:
  std::uint64_t bytes_;
  std::uint64_t mapped_bytes_;
  void* mapped_;
  float* data_;
  std::uint64_t next_ = 0;
};

struct Steps {
  int count = 0;
  double seconds = 0;
  double mean() const { return count == 0 ? 0 : seconds / count; }
  void add(double step_seconds) {
    ++count;
    seconds += step_seconds;
  }
};

resurgo::Config store_config(const Options& options) {
  return resurgo::Config::load("", {{"local.path", options.dir},
                                    {"persistent.every", "0"},
                                    {"local.keep", "1"},
                                    {"capture.mode", "fork"},
                                    {"pipeline.compress", "none"},
                                    {"log.level", options.log_level}});
}

void run(const Options& options) {
  resurgo::set_huge_page_collapse_for_testing(options.collapse);
  State state(options);
  Steps baseline;
  for (int i = 0; i < 2 * kSweepSteps; ++i) {
    const double step = state.step();
    if (i >= kSweepSteps) baseline.add(step);
  }
  std::printf("{\"start\": {\"bytes\": %llu, \"huge_bytes\": %llu, \"baseline_step_s\": %.9f}}\n",
              static_cast<unsigned long long>(state.bytes()),
              static_cast<unsigned long long>(resurgo::anon_huge_page_bytes_at(state.data())), baseline.mean());
  const resurgo::HugePageCollapseTotals before = resurgo::huge_page_collapse_totals();
  resurgo::Store store("fork_repeat", store_config(options));
  store.protect(0, state.data(), state.bytes(), "state");
  for (int version = 0; version < options.forks; ++version) {
    const std::uint64_t huge_at_fork = resurgo::anon_huge_page_bytes_at(state.data());
    const double cpu_started = thread_cpu_seconds();
    const Clock::time_point started = Clock::now();
    store.checkpoint(version);
    const double blocking = seconds_since(started);
    const double blocking_cpu = thread_cpu_seconds() - cpu_started;
    std::atomic<bool> durable{false};
    std::exception_ptr failure;
    std::thread waiter([&] {
      try {
        store.wait(version, resurgo::kL2);
      } catch (...) {
        failure = std::current_exception();
      }
      durable = true;
    });
    Steps during;
    while (!durable) during.add(state.step());
    waiter.join();
    if (failure) std::rethrow_exception(failure);
    const double durable_seconds = seconds_since(started);
    Steps between;
    const Clock::time_point interval = Clock::now();
    while (seconds_since(interval) < options.interval_seconds) between.add(state.step());
    resurgo::VersionStats stats;
    for (const resurgo::VersionStats& each : store.stats()) {
      if (each.version == version) stats = each;
    }
    std::printf("{\"fork\": {\"version\": %d, \"blocking_s\": %.9f, \"blocking_cpu_s\": %.9f, \"fork_s\": %.9f, "
                "\"backpressure_s\": %.9f, "
                "\"durable_s\": %.6f, \"huge_at_fork_bytes\": %llu, \"copy_on_write_bytes\": %llu, "
                "\"steps_during\": %d, \"step_during_s\": %.9f, \"steps_between\": %d, \"step_between_s\": %.9f}}\n",
                version, blocking, blocking_cpu, stats.copy_seconds, stats.backpressure_seconds, durable_seconds,
                static_cast<unsigned long long>(huge_at_fork),
                static_cast<unsigned long long>(stats.copy_on_write_bytes), during.count, during.mean(),
                between.count, between.mean());
    std::fflush(stdout);
  }
  store.close();
  const resurgo::HugePageCollapseTotals after = resurgo::huge_page_collapse_totals();
  std::printf("{\"end\": {\"passes\": %llu, \"collapsed_bytes\": %llu, \"collapse_cpu_s\": %.6f}}\n",
              static_cast<unsigned long long>(after.passes - before.passes),
              static_cast<unsigned long long>(after.collapsed_bytes - before.collapsed_bytes),
              after.cpu_seconds - before.cpu_seconds);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fork_repeat: %s\n", error.what());
    return 1;
  }
  return 0;
}
