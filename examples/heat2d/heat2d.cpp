// heat2d: 2D heat diffusion (explicit Euler, 5-point stencil, Dirichlet
// boundaries held at 0, a hot disc in the middle) checkpointed with Resurgo.
//
//   heat2d --nx N --ny N --steps S --every K --store NAME [--no-checkpoint]
//          [--output FILE] [--stop-after T] [--config FILE]
//
// Started again after a crash, it continues from the newest intact version
// and ends with the same bytes as an uninterrupted run. The field is raw
// float64, row-major (ny rows of nx), boundaries included, identical to the
// output of heat2d.py and heat2d.f90 for the same options.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/resurgo.hpp"

namespace {

constexpr double kAlpha = 0.2;  // diffusion number; explicit Euler is stable up to 0.25

struct Options {
  int nx = 1024, ny = 1024;
  int steps = 100, every = 10;
  std::string store = "heat2d", output, config;
  bool checkpoint = true;
  int stop_after = -1;  // steps computed in this run before exiting; -1 = all
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "heat2d: %s\nusage: heat2d --nx N --ny N --steps S --every K --store NAME "
               "[--no-checkpoint] [--output FILE] [--stop-after T] [--config FILE]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-checkpoint") { o.checkpoint = false; continue; }
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    const char* v = argv[++i];
    if (a == "--nx") o.nx = std::atoi(v);
    else if (a == "--ny") o.ny = std::atoi(v);
    else if (a == "--steps") o.steps = std::atoi(v);
    else if (a == "--every") o.every = std::atoi(v);
    else if (a == "--store") o.store = v;
    else if (a == "--output") o.output = v;
    else if (a == "--stop-after") o.stop_after = std::atoi(v);
    else if (a == "--config") o.config = v;
    else usage(("unknown option " + a).c_str());
  }
  if (o.nx < 3 || o.ny < 3 || o.steps < 0 || o.every < 1) usage("bad sizes");
  return o;
}

// Hot disc of radius min(nx, ny)/8 at the centre, cold elsewhere. Integer
// arithmetic so that every language builds exactly the same field.
void initialize(std::vector<double>& u, int nx, int ny) {
  const long r = std::min(nx, ny) / 8, cx = nx / 2, cy = ny / 2;
  for (long j = 0; j < ny; ++j)
    for (long i = 0; i < nx; ++i)
      u[static_cast<std::size_t>(j * nx + i)] =
          (i - cx) * (i - cx) + (j - cy) * (j - cy) <= r * r ? 1.0 : 0.0;
}

// One step, in place, so the protected region never moves (a two-buffer
// swap would change which buffer holds the state). `above` keeps the old
// values of row j-1 and `old` those of row j while row j is overwritten.
// The sum is written in the same order in every language of this example.
void step(double* u, int nx, int ny, std::vector<double>& above, std::vector<double>& old) {
  const std::size_t n = static_cast<std::size_t>(nx);
  std::copy_n(u, n, above.data());
  for (int j = 1; j < ny - 1; ++j) {
    double* row = u + static_cast<std::size_t>(j) * n;
    const double* below = row + n;  // row j+1 is still old
    std::copy_n(row, n, old.data());
    for (std::size_t i = 1; i + 1 < n; ++i)
      row[i] = old[i] + kAlpha * (old[i - 1] + old[i + 1] + above[i] + below[i] - 4.0 * old[i]);
    std::swap(above, old);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& o) {
  using clock = std::chrono::steady_clock;
  const std::size_t cells = static_cast<std::size_t>(o.nx) * static_cast<std::size_t>(o.ny);
  std::vector<double> u(cells), above(static_cast<std::size_t>(o.nx)),
      old(static_cast<std::size_t>(o.nx));
  std::int64_t step_no = 0;  // protected too: the state is (field, step)
  initialize(u, o.nx, o.ny);

  // --no-checkpoint runs the identical loop with no store at all: the baseline.
  std::optional<resurgo::Store> store;
  int restarted_from = -1;
  double restart_seconds = 0;
  if (o.checkpoint) {
    store.emplace(o.store, resurgo::Config::load(o.config));
    store->protect(0, u.data(), cells * sizeof(double), "field", {"float64", {o.ny, o.nx}});
    store->protect(1, &step_no, sizeof step_no, "step", {"int64", {}});
    if (store->latest()) {
      const auto t0 = clock::now();
      restarted_from = store->restart();  // newest intact version; falls back past damaged ones
      restart_seconds = seconds_since(t0);
      if (step_no != restarted_from) {
        std::fprintf(stderr, "heat2d: version %d holds step %lld\n", restarted_from,
                     static_cast<long long>(step_no));
        return 1;
      }
    }
  }

  int checkpoints = 0, computed = 0;
  const auto t0 = clock::now();
  while (step_no < o.steps && computed != o.stop_after) {
    step(u.data(), o.nx, o.ny, above, old);
    ++step_no;
    ++computed;
    if (store && step_no % o.every == 0) {
      // The version number is the step: restart needs no other bookkeeping.
      store->checkpoint(static_cast<int>(step_no));
      ++checkpoints;
      // Flushed at once: demo.py kills this process right after reading it.
      std::printf("checkpoint %lld\n", static_cast<long long>(step_no));
      std::fflush(stdout);
    }
  }
  std::vector<double> blocking;
  if (store) {
    store->wait();  // every version durable at L2 before we call the run done
    for (const auto& s : store->stats()) blocking.push_back(s.blocking_seconds);
  }
  const double wall = seconds_since(t0);
  if (store) store->close();  // reports a background error, if any, as an exception

  if (!o.output.empty() && step_no == o.steps) {
    std::ofstream out(o.output, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(u.data()),
              static_cast<std::streamsize>(cells * sizeof(double)));
    if (!out.flush()) {
      std::fprintf(stderr, "heat2d: cannot write %s\n", o.output.c_str());
      return 1;
    }
  }

  std::printf("RESULT {\"steps\": %lld, \"steps_run\": %d, \"checkpoints\": %d, "
              "\"restarted_from\": %d, \"wall_seconds\": %.6f, \"restart_seconds\": %.6f, "
              "\"state_bytes\": %zu, \"blocking_seconds\": [",
              static_cast<long long>(step_no), computed, checkpoints, restarted_from, wall,
              restart_seconds, cells * sizeof(double) + sizeof step_no);
  for (std::size_t i = 0; i < blocking.size(); ++i)
    std::printf("%s%.6f", i ? ", " : "", blocking[i]);
  std::printf("]}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    return run(o);
  } catch (const resurgo::Error& e) {
    std::fprintf(stderr, "heat2d: resurgo error %d: %s\n", static_cast<int>(e.code()), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat2d: %s\n", e.what());
  }
  return 1;
}
