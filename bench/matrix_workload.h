// The workload every row of bench/matrix.py runs (matrix_driver.cpp,
// matrix_petsc.cpp, matrix_ga.cpp include this header; nothing is copied):
// a synthetic Hessian assembly after the ConvergentMatrix paper, section IV
// (papers/convergent-matrix-distributed-hessian-assembly.txt).
//
// The matrix: float32, --size x --size (N), --block x --block blocks (64),
// dealt 2-D block-cyclically over the most nearly square grid of the ranks
// (MPI_Dims_create: grid_rows >= grid_cols, rank r at (r / grid_cols,
// r mod grid_cols), as resurgo::MatrixLayout with grid 0 x 0 and
// Cblacs_gridinit(..., "Row", ...)).
//
// The updates: each rank issues --updates-per-rank updates (weak scaling:
// the same number per rank at every rank count). Update u of rank p is the
// symmetric update of a Gauss-Newton Hessian, A[ix, ix] += G_i^T G_i, upper
// triangle only: element (i, j) of the n x n values is added to A[ix[i],
// ix[j]] where i <= j (resurgo's update_symmetric), n = round(fraction * N)
// (--update-fraction, 0.04). ix is a strided index set, sorted and distinct
// as path integration produces it: ix[k] = start + k * stride, the stride
// drawn uniformly from [S/2, S] with S = (N - 1) / (n - 1), so an update
// spans 50 to 100 % of the matrix, the start uniformly where the set fits.
// The values are k / 1024 with k a hash of (seed, p, u, i, j) in [0, 1024).
//
// The hotspot pattern (--hot-fraction F, default 0): a fraction F of each
// rank's updates, spread evenly over its sequence, are hot: their n indices
// fill whole blocks, the blocks 0, L, 2L, ... with L the least common
// multiple of the grid's dimensions, so that every element of a hot update
// lies in the few blocks of grid process (0, 0): rank 0 receives all of
// them. The same exactness holds (a hot element gets at most P x U
// contributions too).
//
// Exactness: every value is a multiple of 2^-10 below 1, and an element
// receives at most P x updates-per-rank contributions, so while that is at
// most 2^14 every partial sum is a multiple of 2^-10 below 2^14, which
// float32 (24-bit significand) holds exactly: the assembled matrix is the
// same bit for bit whatever the order of the additions, in float32 and in
// float64 (PETSc). The checks therefore compare with zero tolerance:
//   sum       the sum of all elements (float64 per rank, reduced), against
//             the sum of every upper-triangle value issued;
//   weighted  the sum of A[r, c] * w(r, c), w = 1 + (7r + 3c) mod 11, which
//             a misplaced or transposed element changes (all exact in
//             float64: below 2^53);
//   samples   --samples elements (most of them hit by some update, a few
//             anywhere), each compared with the sum of the contributions
//             recomputed from the generator, read where it is stored.
// The values, the index sets and the expected sums are generated before
// the timed part.
//
// The timed part (timed_run): a barrier, then for each update a simulated
// compute step (a sleep of --compute-ms that leaves the core free, as the
// paper's OpenMP thread team leaves the update thread waiting), then the
// update call; then the commit (or assembly). Each rank reports its own
// times; the job's time to solution is the slowest rank's.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <time.h>
#include <utility>
#include <vector>

namespace matrix_bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// ------------------------------------------------------------------ options
struct Options {
  std::int64_t size = 16384;   // N
  std::int64_t block = 64;     // row and column block
  int updates = 16;            // per rank
  double fraction = 0.04;      // n / N
  double compute_ms = 100;     // simulated compute before each update
  std::uint64_t seed = 1;
  int samples = 64;
  std::string row;             // what the program runs (its own names)
  std::string progress = "auto";        // ConvergentMatrix rows: auto | thread | inline
  std::int64_t max_in_flight_mib = 64;  // ConvergentMatrix rows: MatrixOptions::max_in_flight_bytes
  std::string collective = "reduce";    // replicated row: reduce (one MPI_Reduce per owner) | reduce_scatter
  std::string target_order = "random";  // ConvergentMatrix rows: MatrixOptions::target_order, random | fixed
  double hot_fraction = 0;              // of each rank's updates, hot (the hotspot pattern above)
  std::int64_t hot_period = 1;          // L, blocks from one hot block to the next (from the grid, not an option)
};

// n: the dimension of every update.
inline std::int64_t update_dim(const Options& opt) {
  return std::clamp<std::int64_t>(std::llround(opt.fraction * static_cast<double>(opt.size)), 1, opt.size);
}

[[noreturn]] inline void usage(const char* program, const std::string& why) {
  if (world_rank() == 0) {
    std::fprintf(stderr,
                 "%s: %s\n"
                 "usage: mpirun -np P %s [--row ROW] [--size N] [--block B] [--updates-per-rank U]\n"
                 "         [--update-fraction F] [--compute-ms MS] [--seed S] [--samples K]\n"
                 "         [--progress auto|thread|inline] [--max-in-flight-mib M]\n"
                 "         [--collective reduce|reduce_scatter] [--target-order random|fixed]\n"
                 "         [--hot-fraction F]\n",
                 program, why.c_str(), program);
  }
  MPI_Finalize();
  std::exit(64);
}

inline Options parse(int argc, char** argv, const char* program) {
  Options opt;
  const auto integer = [&](const std::string& flag, const std::string& value, long long least) {
    char* end = nullptr;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    if (*end != '\0' || n < least) usage(program, flag + " takes an integer >= " + std::to_string(least));
    return n;
  };
  const auto real = [&](const std::string& flag, const std::string& value) {
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (*end != '\0' || !(x >= 0)) usage(program, flag + " takes a number >= 0");
    return x;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(program, "missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--row") {
      opt.row = value;
    } else if (arg == "--size") {
      opt.size = integer(arg, value, 2);
    } else if (arg == "--block") {
      opt.block = integer(arg, value, 1);
    } else if (arg == "--updates-per-rank") {
      opt.updates = static_cast<int>(integer(arg, value, 1));
    } else if (arg == "--update-fraction") {
      opt.fraction = real(arg, value);
    } else if (arg == "--compute-ms") {
      opt.compute_ms = real(arg, value);
    } else if (arg == "--seed") {
      opt.seed = static_cast<std::uint64_t>(integer(arg, value, 0));
    } else if (arg == "--samples") {
      opt.samples = static_cast<int>(integer(arg, value, 0));
    } else if (arg == "--progress") {
      if (value != "auto" && value != "thread" && value != "inline") usage(program, "--progress is auto, thread or inline");
      opt.progress = value;
    } else if (arg == "--collective") {
      if (value != "reduce" && value != "reduce_scatter") usage(program, "--collective is reduce or reduce_scatter");
      opt.collective = value;
    } else if (arg == "--target-order") {
      if (value != "random" && value != "fixed") usage(program, "--target-order is random or fixed");
      opt.target_order = value;
    } else if (arg == "--hot-fraction") {
      opt.hot_fraction = real(arg, value);
    } else if (arg == "--max-in-flight-mib") {
      opt.max_in_flight_mib = integer(arg, value, 1);
    } else {
      usage(program, "unknown argument " + arg);
    }
  }
  if (!(opt.fraction > 0 && opt.fraction <= 1)) usage(program, "--update-fraction must be in (0, 1]");
  if (static_cast<long long>(opt.updates) * world_size() > (1 << 14)) {
    usage(program, "at most 16384 updates in all (ranks x --updates-per-rank), so that every sum stays exact");
  }
  if (opt.hot_fraction > 1) usage(program, "--hot-fraction must be in [0, 1]");
  int dims[2] = {0, 0};
  MPI_Dims_create(world_size(), 2, dims);
  opt.hot_period = std::lcm(dims[0], dims[1]);
  const std::int64_t hot_blocks = (update_dim(opt) + opt.block - 1) / opt.block;
  if (opt.hot_fraction > 0 && ((hot_blocks - 1) * opt.hot_period + 1) * opt.block > opt.size) {
    usage(program, "a hot update's blocks do not fit in the matrix at this rank count: a larger --size");
  }
  return opt;
}

// ---------------------------------------------------------------- generator
inline std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The index set of update u of rank p, k < n: ix[k] = start + k * stride,
// or for a hot update (block > 0) the k-th index of the blocks 0, period,
// 2 period, ...: ix[k] = (k / block) * period * block + k mod block.
struct Span {
  std::int64_t start = 0;
  std::int64_t stride = 1;
  std::int64_t n = 1;
  std::int64_t block = 0;   // hot: the block size; 0: strided
  std::int64_t period = 1;  // hot: blocks from one hot block to the next
  std::uint64_t key = 0;    // seeds the values

  std::int64_t operator[](std::int64_t k) const {
    return block > 0 ? (k / block) * period * block + k % block : start + k * stride;
  }
  // k with ix[k] == index, or -1.
  std::int64_t position(std::int64_t index) const {
    if (block > 0) {
      const std::int64_t b = index / block;
      const std::int64_t k = (b / period) * block + index % block;
      return b % period == 0 && k < n ? k : -1;
    }
    const std::int64_t d = index - start;
    if (d < 0 || d % stride != 0 || d / stride >= n) return -1;
    return d / stride;
  }
};

// Whether update u is hot: a fraction hot_fraction of the updates, evenly
// spread (u is hot where floor((u + 1) F) passes an integer).
inline bool is_hot(const Options& opt, int update) {
  return std::floor((update + 1) * opt.hot_fraction) > std::floor(update * opt.hot_fraction);
}

inline Span span_of(const Options& opt, int rank, int update) {
  Span s;
  s.n = update_dim(opt);
  s.key = mix(opt.seed ^ mix((static_cast<std::uint64_t>(rank) << 32) | static_cast<std::uint32_t>(update)));
  if (is_hot(opt, update)) {
    s.block = opt.block;
    s.period = opt.hot_period;
    return s;
  }
  if (s.n > 1) {
    const std::int64_t most = (opt.size - 1) / (s.n - 1);
    const std::int64_t least = std::max<std::int64_t>(1, most / 2);
    s.stride = least + static_cast<std::int64_t>(mix(s.key + 1) % static_cast<std::uint64_t>(most - least + 1));
  }
  const std::int64_t room = opt.size - (s.n - 1) * s.stride;  // starts that fit: [0, room)
  s.start = static_cast<std::int64_t>(mix(s.key + 2) % static_cast<std::uint64_t>(room));
  return s;
}

// Element (i, j) of the update's n x n values: k / 1024, k in [0, 1024).
inline float value_of(const Span& s, std::int64_t i, std::int64_t j) {
  const std::uint64_t h = mix(s.key ^ (static_cast<std::uint64_t>(i * s.n + j) * 0xd6e8feb86659fd93ULL));
  return static_cast<float>(h >> 54) / 1024.0f;
}

inline double weight(std::int64_t row, std::int64_t col) { return static_cast<double>(1 + (7 * row + 3 * col) % 11); }

// This rank's updates, generated before anything is timed.
struct Update {
  Span span;
  std::vector<std::int64_t> ix;  // n indices, ascending
  std::vector<float> values;     // n x n, row-major (the lower triangle is generated but never added)
};

struct Workload {
  Options opt;
  int rank = 0;
  int ranks = 1;
  std::int64_t n = 0;
  std::vector<Update> updates;
  double sum = 0;       // this rank's upper-triangle values, summed
  double weighted = 0;  // and weighted by w(ix[i], ix[j])
  std::uint64_t elements = 0;  // upper-triangle elements issued by this rank

  Workload(const Options& o, int my_rank, int nranks) : opt(o), rank(my_rank), ranks(nranks), n(update_dim(o)) {
    updates.resize(static_cast<std::size_t>(o.updates));
    for (int u = 0; u < o.updates; ++u) {
      Update& up = updates[static_cast<std::size_t>(u)];
      up.span = span_of(o, rank, u);
      up.ix.resize(static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) up.ix[static_cast<std::size_t>(k)] = up.span[k];
      up.values.resize(static_cast<std::size_t>(n * n));
      for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          const float v = value_of(up.span, i, j);
          up.values[static_cast<std::size_t>(i * n + j)] = v;
          if (i <= j) {
            sum += v;
            weighted += v * weight(up.ix[static_cast<std::size_t>(i)], up.ix[static_cast<std::size_t>(j)]);
          }
        }
      }
      elements += static_cast<std::uint64_t>(n * (n + 1) / 2);
    }
  }

  // The expected value of A[row, col] once every rank's updates are in.
  double expected(std::int64_t row, std::int64_t col) const {
    double total = 0;
    for (int p = 0; p < ranks; ++p) {
      for (int u = 0; u < opt.updates; ++u) {
        const Span s = span_of(opt, p, u);
        const std::int64_t i = s.position(row);
        const std::int64_t j = i < 0 ? -1 : s.position(col);
        if (i >= 0 && j >= i) total += value_of(s, i, j);
      }
    }
    return total;
  }

  // The sampled positions, the same on every rank: most hit by some update
  // (upper triangle), every fourth anywhere.
  std::vector<std::pair<std::int64_t, std::int64_t>> samples() const {
    std::vector<std::pair<std::int64_t, std::int64_t>> at;
    for (int k = 0; k < opt.samples; ++k) {
      const std::uint64_t h = mix(opt.seed * 0x51ed27e3ULL + static_cast<std::uint64_t>(k) + 7);
      if (k % 4 == 3) {
        at.emplace_back(static_cast<std::int64_t>(h % static_cast<std::uint64_t>(opt.size)),
                        static_cast<std::int64_t>(mix(h) % static_cast<std::uint64_t>(opt.size)));
        continue;
      }
      const Span s = span_of(opt, static_cast<int>(h % static_cast<std::uint64_t>(ranks)),
                             static_cast<int>(mix(h + 1) % static_cast<std::uint64_t>(opt.updates)));
      std::int64_t i = static_cast<std::int64_t>(mix(h + 2) % static_cast<std::uint64_t>(n));
      std::int64_t j = static_cast<std::int64_t>(mix(h + 3) % static_cast<std::uint64_t>(n));
      if (i > j) std::swap(i, j);
      at.emplace_back(s[i], s[j]);
    }
    return at;
  }
};

// ------------------------------------------------------------------- layout
// ScaLAPACK's NUMROC: how many of n indices in blocks of nb process iproc of
// nprocs holds (the first block on process 0).
inline std::int64_t numroc(std::int64_t n, std::int64_t nb, int iproc, int nprocs) {
  const std::int64_t blocks = n / nb;
  std::int64_t count = (blocks / nprocs) * nb;
  const std::int64_t extra = blocks % nprocs;
  if (iproc < extra) {
    count += nb;
  } else if (iproc == extra) {
    count += n % nb;
  }
  return count;
}

// The most nearly square grid, grid_rows >= grid_cols (MPI_Dims_create).
inline std::pair<int, int> square_grid(int ranks) {
  int dims[2] = {0, 0};
  MPI_Dims_create(ranks, 2, dims);
  return {dims[0], dims[1]};
}

// The block-cyclic layout of one rank (for the rows that keep their own).
struct Grid {
  std::int64_t size = 0, block = 0;
  int rows = 1, cols = 1;       // process grid
  int my_row = 0, my_col = 0;
  std::int64_t local_rows = 0, local_cols = 0;

  Grid(std::int64_t n, std::int64_t nb, int grid_rows, int grid_cols, int rank)
      : size(n), block(nb), rows(grid_rows), cols(grid_cols), my_row(rank / grid_cols), my_col(rank % grid_cols) {
    local_rows = numroc(n, nb, my_row, rows);
    local_cols = numroc(n, nb, my_col, cols);
  }
  int row_owner(std::int64_t r) const { return static_cast<int>((r / block) % rows); }
  int col_owner(std::int64_t c) const { return static_cast<int>((c / block) % cols); }
  std::int64_t local_row(std::int64_t r) const { return (r / block / rows) * block + r % block; }
  std::int64_t local_col(std::int64_t c) const { return (c / block / cols) * block + c % block; }
  int owner(std::int64_t r, std::int64_t c) const { return row_owner(r) * cols + col_owner(c); }
  // Global index of each local row (or column) of process `proc` of `procs`.
  std::vector<std::int64_t> globals(std::int64_t local, int proc, int procs) const {
    std::vector<std::int64_t> g(static_cast<std::size_t>(local));
    for (std::int64_t l = 0; l < local; ++l) {
      g[static_cast<std::size_t>(l)] = ((l / block) * procs + proc) * block + l % block;
    }
    return g;
  }
};

// This rank's part of the matrix as the checks read it: element (lr, lc) at
// data[lc * ld + lr] (column-major) or data[lr * ld + lc] (row-major), with
// global row rows[lr] and global column cols[lc], both ascending.
struct LocalView {
  std::vector<std::int64_t> rows, cols;
  std::int64_t ld = 1;
  bool row_major = false;

  std::int64_t offset(std::int64_t lr, std::int64_t lc) const { return row_major ? lr * ld + lc : lc * ld + lr; }
  std::optional<std::int64_t> find(std::int64_t row, std::int64_t col) const {
    const auto r = std::lower_bound(rows.begin(), rows.end(), row);
    const auto c = std::lower_bound(cols.begin(), cols.end(), col);
    if (r == rows.end() || *r != row || c == cols.end() || *c != col) return std::nullopt;
    return offset(r - rows.begin(), c - cols.begin());
  }
};

inline LocalView block_cyclic_view(const Grid& g, std::int64_t ld) {
  LocalView v;
  v.rows = g.globals(g.local_rows, g.my_row, g.rows);
  v.cols = g.globals(g.local_cols, g.my_col, g.cols);
  v.ld = ld;
  return v;
}

// ------------------------------------------------------------------- checks
struct Check {
  double sum = 0, expected_sum = 0;
  double weighted = 0, expected_weighted = 0;
  int samples = 0, samples_found = 0, sample_mismatches = 0;
  std::string first_mismatch;  // rank 0's text, where some sample differs
  bool ok() const {
    return sum == expected_sum && weighted == expected_weighted && samples_found == samples && sample_mismatches == 0;
  }
};

// Collective. T: float or double.
template <typename T>
Check verify(const Workload& w, const T* data, const LocalView& view) {
  double mine[2] = {0, 0};
  for (std::size_t lc = 0; lc < view.cols.size(); ++lc) {
    for (std::size_t lr = 0; lr < view.rows.size(); ++lr) {
      const double a = static_cast<double>(
          data[view.offset(static_cast<std::int64_t>(lr), static_cast<std::int64_t>(lc))]);
      mine[0] += a;
      mine[1] += a * weight(view.rows[lr], view.cols[lc]);
    }
  }
  const double issued[2] = {w.sum, w.weighted};
  double got[2] = {0, 0}, want[2] = {0, 0};
  MPI_Allreduce(mine, got, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(issued, want, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  Check check;
  check.sum = got[0];
  check.weighted = got[1];
  check.expected_sum = want[0];
  check.expected_weighted = want[1];
  // Samples: where stored, the value against the generator's.
  const auto at = w.samples();
  int mismatches = 0, found = 0;
  std::string first;
  for (const auto& [row, col] : at) {
    const auto offset = view.find(row, col);
    if (!offset) continue;
    ++found;
    const double got_value = static_cast<double>(data[*offset]);
    const double want_value = w.expected(row, col);
    if (got_value != want_value) {
      if (mismatches++ == 0) {
        first = "A[" + std::to_string(row) + ", " + std::to_string(col) + "] = " + std::to_string(got_value) +
                ", expected " + std::to_string(want_value) + " (rank " + std::to_string(w.rank) + ")";
      }
    }
  }
  MPI_Allreduce(&mismatches, &check.sample_mismatches, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&found, &check.samples_found, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);  // each stored once
  check.samples = static_cast<int>(at.size());
  // The first mismatch of the lowest rank that has one, to rank 0.
  const int has = mismatches > 0 ? w.rank : w.ranks;
  int lowest = w.ranks;
  MPI_Allreduce(&has, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (lowest < w.ranks && lowest != 0) {
    char text[256] = {0};
    if (w.rank == lowest) {
      std::snprintf(text, sizeof text, "%s", first.c_str());
      MPI_Send(text, sizeof text, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    } else if (w.rank == 0) {
      MPI_Recv(text, sizeof text, MPI_CHAR, lowest, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      first = text;
    }
  }
  if (w.rank == 0) check.first_mismatch = first;
  return check;
}

// --------------------------------------------------------------- timed part
struct Timings {
  double total = 0;       // barrier released .. commit returned
  double compute = 0;     // in the simulated compute steps (measured)
  double update = 0;      // in the update calls
  double update_cpu = 0;  // the calling thread's CPU time in them (not counting waits for a core)
  double commit = 0;      // in the commit (assembly)
};

inline double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// A barrier, then per update the compute step (a sleep; with `idle`, sliced
// into 1 ms sleeps with idle() between, for inline progress) and
// update(Update&); then commit(). Collective.
inline Timings timed_run(const Workload& w, const std::function<void(const Update&)>& update,
                         const std::function<void()>& commit, const std::function<void()>& idle = {}) {
  const auto compute = std::chrono::duration<double, std::milli>(w.opt.compute_ms);
  Timings t;
  MPI_Barrier(MPI_COMM_WORLD);
  const Clock::time_point start = Clock::now();
  for (const Update& up : w.updates) {
    const Clock::time_point c0 = Clock::now();
    if (w.opt.compute_ms > 0) {
      const auto until = c0 + std::chrono::duration_cast<Clock::duration>(compute);
      if (idle) {
        for (Clock::time_point now = c0; now < until; now = Clock::now()) {
          std::this_thread::sleep_for(std::min<Clock::duration>(until - now, std::chrono::milliseconds(1)));
          idle();
        }
      } else {
        std::this_thread::sleep_until(until);
      }
    }
    const Clock::time_point u0 = Clock::now();
    t.compute += std::chrono::duration<double>(u0 - c0).count();
    const double cpu0 = thread_cpu_seconds();
    update(up);
    t.update_cpu += thread_cpu_seconds() - cpu0;
    t.update += seconds_since(u0);
  }
  const Clock::time_point c0 = Clock::now();
  commit();
  t.commit = seconds_since(c0);
  t.total = seconds_since(start);
  return t;
}

// ------------------------------------------------------------------- report
// Peak resident memory of this process (VmHWM), bytes; 0 when unknown.
inline double peak_rss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return 1024.0 * std::strtod(line.c_str() + 6, nullptr);
  }
  return 0;
}

// Proportional set size now (Pss of /proc/self/smaps_rollup): pages shared
// with other processes (MPI's shared-memory segments and windows) counted
// in proportion; bytes, 0 when unknown.
inline double proportional_rss() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("Pss:", 0) == 0) return 1024.0 * std::strtod(line.c_str() + 4, nullptr);
  }
  return 0;
}

inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// One JSON line at rank 0: the run's parameters, `scalars` (already JSON
// values), each of `per_rank` as an array over ranks, and the check.
// Collective.
inline void print_run(const Workload& w, const std::string& row, int grid_rows, int grid_cols,
                      const std::vector<std::pair<std::string, std::string>>& scalars,
                      const std::vector<std::pair<std::string, double>>& per_rank, const Check& check) {
  std::vector<double> mine;
  for (const auto& field : per_rank) mine.push_back(field.second);
  std::vector<double> all(w.rank == 0 ? mine.size() * static_cast<std::size_t>(w.ranks) : 0);
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), static_cast<int>(mine.size()),
             MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (w.rank != 0) return;
  std::string line = "{\"kind\": \"run\", \"row\": " + json_string(row);
  char number[64];
  const auto add = [&](const std::string& key, const std::string& value) { line += ", \"" + key + "\": " + value; };
  const auto num = [&](double x) {
    std::snprintf(number, sizeof number, "%.17g", x);
    return std::string(number);
  };
  add("ranks", std::to_string(w.ranks));
  add("grid", "[" + std::to_string(grid_rows) + ", " + std::to_string(grid_cols) + "]");
  add("size", std::to_string(w.opt.size));
  add("block", std::to_string(w.opt.block));
  add("updates_per_rank", std::to_string(w.opt.updates));
  add("n", std::to_string(w.n));
  add("compute_ms", num(w.opt.compute_ms));
  add("elements_per_rank", std::to_string(w.elements));
  for (const auto& [key, value] : scalars) add(key, value);
  for (std::size_t f = 0; f < per_rank.size(); ++f) {
    std::string values = "[";
    for (int r = 0; r < w.ranks; ++r) {
      values += (r ? ", " : "") + num(all[static_cast<std::size_t>(r) * per_rank.size() + f]);
    }
    add(per_rank[f].first, values + "]");
  }
  add("check", "{\"ok\": " + std::string(check.ok() ? "true" : "false") + ", \"sum\": " + num(check.sum) +
                   ", \"expected_sum\": " + num(check.expected_sum) + ", \"weighted\": " + num(check.weighted) +
                   ", \"expected_weighted\": " + num(check.expected_weighted) + ", \"samples\": " +
                   std::to_string(check.samples) + ", \"samples_found\": " +
                   std::to_string(check.samples_found) + ", \"sample_mismatches\": " +
                   std::to_string(check.sample_mismatches) + ", \"first_mismatch\": " +
                   json_string(check.first_mismatch) + "}");
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

// The per-rank fields every row reports from its Timings, peak memory and
// the matrix's own local bytes.
inline std::vector<std::pair<std::string, double>> common_fields(const Timings& t, double local_bytes) {
  return {{"total_s", t.total},          {"compute_s", t.compute},
          {"update_s", t.update},        {"update_cpu_s", t.update_cpu},
          {"commit_s", t.commit},
          {"vmhwm_bytes", peak_rss()},   {"pss_bytes", proportional_rss()},
          {"local_bytes", local_bytes}};
}

}  // namespace matrix_bench
