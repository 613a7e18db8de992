// small_checkpoints: one case of bench/small_checkpoints.py (issue 27), the
// fixed costs of checkpoint() and restart() at small states, through the
// public C++ API only.
//
//   small_checkpoints --bytes N --route memory|memory+L2|L2 --calls K
//                     --step-us S --dir DIR
//
// Protects one region of N bytes, then K times: a compute step of S
// microseconds (a spin on the clock; 0 = back to back), one write of every
// 8-byte word of the state, checkpoint(v) timed. Then wait(), and K times
// restart() of the newest version timed. In the same process, the floor:
// the same K steps with memcpy of the state into a touched buffer instead of
// checkpoint(), and memcpy back instead of restart().
//
// Output: one JSON object on stdout with the per-call medians (seconds) and
// the store's own counts: the versions whose backpressure was not zero and
// the sum of their backpressure.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "resurgo/resurgo.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::size_t bytes = 4096;
  std::string route = "memory";
  int calls = 1000;
  double step_us = 0;
  std::string dir = "/tmp";
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--bytes") options.bytes = std::strtoull(value, nullptr, 10);
    else if (key == "--route") options.route = value;
    else if (key == "--calls") options.calls = std::atoi(value);
    else if (key == "--step-us") options.step_us = std::atof(value);
    else if (key == "--dir") options.dir = value;
    else {
      std::fprintf(stderr, "small_checkpoints: unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  return options;
}

resurgo::Config config_for(const Options& options) {
  const bool memory = options.route.find("memory") != std::string::npos;
  const bool local = options.route.find("L2") != std::string::npos;
  return resurgo::Config::load("", {{"memory.every", memory ? "1" : "0"},
                                    {"memory.keep", "2"},
                                    {"local.every", local ? "1" : "0"},
                                    {"local.path", options.dir},
                                    {"persistent.every", "0"}});
}

// The application's compute step: a spin, so that the core stays busy.
void compute(double microseconds) {
  if (microseconds <= 0) return;
  const Clock::time_point until = Clock::now() + std::chrono::nanoseconds(static_cast<long>(microseconds * 1e3));
  while (Clock::now() < until) {
  }
}

void write_state(std::vector<std::uint64_t>& state, std::uint64_t step) {
  for (std::uint64_t& word : state) word += step;
}

template <typename Call>
double timed(Call&& call) {
  const Clock::time_point started = Clock::now();
  call();
  return std::chrono::duration<double>(Clock::now() - started).count();
}

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  std::vector<std::uint64_t> state(options.bytes / 8, 1);
  std::vector<std::uint64_t> copy(state.size(), 0);
  std::vector<double> copy_times, copy_back_times, checkpoint_times, restart_times;

  for (int call = 0; call < options.calls; ++call) {
    compute(options.step_us);
    write_state(state, call);
    copy_times.push_back(timed([&] { std::memcpy(copy.data(), state.data(), options.bytes); }));
  }
  for (int call = 0; call < options.calls; ++call) {
    copy_back_times.push_back(timed([&] { std::memcpy(state.data(), copy.data(), options.bytes); }));
  }

  resurgo::Store store("small-checkpoints", config_for(options));
  store.protect(0, state.data(), options.bytes, "state");
  for (int call = 0; call < options.calls; ++call) {
    compute(options.step_us);
    write_state(state, call);
    checkpoint_times.push_back(timed([&] { store.checkpoint(call); }));
  }
  store.wait(resurgo::kAllVersions, options.route == "memory" ? resurgo::kL1 : resurgo::kL2);
  for (int call = 0; call < options.calls; ++call) {
    restart_times.push_back(timed([&] { store.restart(options.calls - 1); }));
  }
  int waited = 0;
  double backpressure = 0;
  for (const resurgo::VersionStats& version : store.stats()) {
    if (version.backpressure_seconds > 0) ++waited;
    backpressure += version.backpressure_seconds;
  }
  store.close();
  std::printf(
      "{\"bytes\": %zu, \"route\": \"%s\", \"calls\": %d, \"step_us\": %g, \"copy\": %.9g, \"copy_back\": %.9g, "
      "\"checkpoint\": %.9g, \"restart\": %.9g, \"backpressured_versions\": %d, \"backpressure_seconds\": %.9g}\n",
      options.bytes, options.route.c_str(), options.calls, options.step_us, median(copy_times), median(copy_back_times),
      median(checkpoint_times), median(restart_times), waited, backpressure);
  return 0;
}
