// heat_blocks_mpi: an explicit heat-diffusion code whose fields are declared
// to the automatic runtime as blocks of global arrays (docs/auto.md,
// "Restart on another rank count"; issue 31 part 3), so that a checkpoint
// taken on P ranks restarts on Q. The global ROWS x COLS grid is cut in
// blocks of rows (uneven when ROWS % P != 0). The stencil loop receives the
// neighbours' edge rows inside the loop: they are no dataset, there is no
// ring to map to another decomposition. Every value that reaches the
// control flow is the same bits on any rank count: the largest change (a
// maximum, exact in any order) and the heat total (row sums gathered in
// global row order and added in that order), both through query(); the
// time step adapts to the largest change.
//
//   mpirun -n P heat_blocks_mpi [--rows R] [--cols C] [--steps S] [--mode initphase|fastfw]
//       [--checkpoint-every E] [--stop-step K] [--blocks tiled|gap|overlap] [--dump FILE]
//
//   --checkpoint-every E  rank 0 alone calls trigger() at the top of every
//                         E-th step: the agreement tells the other ranks
//   --stop-step K         at the top of step K, once a checkpoint was taken,
//                         every rank waits until it is on L4 (the level a
//                         job of another rank count reads) and kills itself
//   --blocks gap          the last rank declares its block a row short: a
//                         row of the global arrays is in no block
//   --blocks overlap      the last rank declares its block a row early: a
//                         row is in two blocks (and the last in none)
//   --dump FILE           rank 0 writes the global field's final bytes
//
// The store's levels come from the environment (RESURGO_LOCAL_PATH with
// {node}, RESURGO_PERSISTENT_PATH, RESURGO_MPI_RANKS_PER_NODE). Rank 0
// prints one line: RESULT {"ranks", "steps", "checksum" (of the global
// field, in row order), "checkpoints", and when the run restored "restore":
// {version, loop_index, skipped_loops, fast_forward, ranks (that wrote it)}}.
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mpi_rows.h"
#include "resurgo/auto.hpp"
#include "resurgo/mpi.hpp"

namespace {

using resurgo::autockpt::Access;
using resurgo::autockpt::Arg;

struct Options {
  int rows = 48;
  int cols = 32;
  int steps = 12;
  bool fastfw = false;
  int checkpoint_every = 0;
  int stop_step = -1;
  std::string blocks = "tiled";
  std::string dump;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "heat_blocks_mpi: %s\nusage: heat_blocks_mpi [--rows R] [--cols C] [--steps S] "
               "[--mode initphase|fastfw] [--checkpoint-every E] [--stop-step K] [--blocks tiled|gap|overlap] "
               "[--dump FILE]\n",
               why.c_str());
  std::exit(2);
}

int number(std::string_view option, std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) usage(std::string(option) + " needs a number");
  return value;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int k = 1; k + 1 < argc; k += 2) {
    const std::string_view option = argv[k], value = argv[k + 1];
    if (option == "--rows") o.rows = number(option, value);
    else if (option == "--cols") o.cols = number(option, value);
    else if (option == "--steps") o.steps = number(option, value);
    else if (option == "--mode" && (value == "initphase" || value == "fastfw")) o.fastfw = value == "fastfw";
    else if (option == "--checkpoint-every") o.checkpoint_every = number(option, value);
    else if (option == "--stop-step") o.stop_step = number(option, value);
    else if (option == "--blocks" && (value == "tiled" || value == "gap" || value == "overlap")) o.blocks = value;
    else if (option == "--dump") o.dump = value;
    else usage("unknown option or value: " + std::string(option) + " " + std::string(value));
  }
  if (argc % 2 == 0) usage("every option takes a value");
  return o;
}

// Where this run is (fastfw's payload): the same on every rank.
struct Payload {
  double time = 0;
  double dt = 0.1;
  std::int64_t step = 1;
};

class HeatBlocks {
 public:
  HeatBlocks(const Options& options, resurgo::Store& store, resurgo::autockpt::Runtime& runtime);
  void run();
  std::vector<double> gather_field() const;  // the global field on rank 0, empty elsewhere
  int checkpoints() const { return checkpoints_; }

 private:
  struct Field {
    std::vector<double> values;
    int id = -1;
  };
  Field declare(const std::string& name);
  void step_begins(Payload& where);
  void diffuse(double dt);
  double largest_change();
  double heat_total();
  double* row(Field& f, int j) { return f.values.data() + static_cast<std::size_t>(j) * cols_; }
  void count_checkpoints();

  const Options& options_;
  resurgo::Store& store_;
  resurgo::autockpt::Runtime& runtime_;
  int rank_ = 0, ranks_ = 1;
  int cols_ = 0, rows_ = 0, first_row_ = 0;
  int checkpoints_ = 0;
  int last_version_ = -1;
  Field u_, next_, conductivity_;
};

HeatBlocks::HeatBlocks(const Options& options, resurgo::Store& store, resurgo::autockpt::Runtime& runtime)
    : options_(options),
      store_(store),
      runtime_(runtime),
      rank_(world(MPI_Comm_rank)),
      ranks_(world(MPI_Comm_size)),
      cols_(options.cols),
      rows_(row_block(options.rows, rank_, ranks_).rows),
      first_row_(row_block(options.rows, rank_, ranks_).first),
      u_(declare("u")),
      next_(declare("u_next")),
      conductivity_(declare("conductivity")) {}

// This rank's rows as a block of the global ROWS x COLS array; --blocks
// gap/overlap make the last rank's declaration wrong on purpose.
HeatBlocks::Field HeatBlocks::declare(const std::string& name) {
  Field f;
  f.values.assign(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(cols_), 0.0);
  const bool last = rank_ == ranks_ - 1;
  const int declared_rows = last && options_.blocks == "gap" ? rows_ - 1 : rows_;
  const int offset = last && options_.blocks == "overlap" ? first_row_ - 1 : first_row_;
  const resurgo::ElementType type{"float64", {declared_rows, cols_}};
  const resurgo::GlobalBlock block{{options_.rows, cols_}, {offset, 0}};
  f.id = runtime_.dataset(name, f.values.data(), static_cast<std::size_t>(declared_rows) * cols_ * sizeof(double),
                          type, block);
  return f;
}

void HeatBlocks::count_checkpoints() {
  const auto made = runtime_.last_checkpoint();
  if (!made || made->version == last_version_) return;
  ++checkpoints_;
  last_version_ = made->version;
}

void HeatBlocks::run() {
  if (runtime_.loop("init", {{u_.id, Access::kWrite}, {conductivity_.id, Access::kWrite}})) {
    for (int j = 0; j < rows_; ++j) {
      const int global_row = first_row_ + j;
      for (int i = 0; i < cols_; ++i) {
        row(u_, j)[i] = global_row < options_.rows / 4 && i < cols_ / 3 ? 50.0 : 1.0;
        row(conductivity_, j)[i] = 0.05 + 0.2 * ((global_row * 7 + i * 3) % 5) / 4.0;
      }
    }
  }
  runtime_.initphase_done();
  Payload where;
  for (; where.step <= options_.steps; ++where.step) {
    step_begins(where);
    diffuse(where.dt);
    const double change = largest_change();
    const double total = heat_total();
    // The control flow hangs on the queries: the step shrinks after a large change.
    where.dt = change > 2.0 ? where.dt * 0.5 : std::min(where.dt * 1.25, 0.2);
    if (rank_ == 0 && where.step == options_.steps) std::printf("heat total %.17g, dt %.6g\n", total, where.dt);
    where.time += where.dt;
  }
  count_checkpoints();
}

// The stop of --stop-step, rank 0's checkpoint request, and fastfw (which,
// when restoring, moves `where` to the checkpoint's step).
void HeatBlocks::step_begins(Payload& where) {
  count_checkpoints();
  if (options_.stop_step > 0 && where.step >= options_.stop_step && runtime_.last_checkpoint()) {
    store_.wait(resurgo::kAllVersions, resurgo::kL4);  // collective: the version is the job's on L4
    std::raise(SIGKILL);
  }
  if (rank_ == 0 && options_.checkpoint_every > 0 && where.step % options_.checkpoint_every == 0 &&
      !runtime_.restoring()) {
    runtime_.trigger();
  }
  if (options_.fastfw) runtime_.fastfw(&where, sizeof where);
}

// u_next = u + dt k laplace(u), no flux through the domain's edges; the
// rows above and below this block come from the neighbouring ranks.
void HeatBlocks::diffuse(double dt) {
  const std::initializer_list<Arg> args{
      {u_.id, Access::kRead}, {conductivity_.id, Access::kRead}, {next_.id, Access::kWrite}};
  if (!runtime_.loop("diffuse", args)) return;
  std::vector<double> above(row(u_, 0), row(u_, 0) + cols_), below(row(u_, rows_ - 1), row(u_, rows_ - 1) + cols_);
  const int up = rank_ > 0 ? rank_ - 1 : MPI_PROC_NULL;
  const int down = rank_ + 1 < ranks_ ? rank_ + 1 : MPI_PROC_NULL;
  MPI_Sendrecv(row(u_, 0), cols_, MPI_DOUBLE, up, 0, below.data(), cols_, MPI_DOUBLE, down, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(row(u_, rows_ - 1), cols_, MPI_DOUBLE, down, 1, above.data(), cols_, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int j = 0; j < rows_; ++j) {
    const double* north = j == 0 ? above.data() : row(u_, j - 1);
    const double* south = j == rows_ - 1 ? below.data() : row(u_, j + 1);
    const double* here = row(u_, j);
    for (int i = 0; i < cols_; ++i) {
      const double west = here[i > 0 ? i - 1 : i], east = here[i + 1 < cols_ ? i + 1 : i];
      const double laplace = north[i] + south[i] + west + east - 4 * here[i];
      row(next_, j)[i] = here[i] + dt * row(conductivity_, j)[i] * laplace;
    }
  }
}

double HeatBlocks::largest_change() {
  double largest = 0;
  if (runtime_.loop("largest_change", {{u_.id, Access::kRead}, {next_.id, Access::kRead}})) {
    double mine = 0;
    for (std::size_t k = 0; k < u_.values.size(); ++k) mine = std::max(mine, std::fabs(next_.values[k] - u_.values[k]));
    MPI_Allreduce(&mine, &largest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  if (runtime_.loop("advance", {{next_.id, Access::kRead}, {u_.id, Access::kWrite}})) u_.values = next_.values;
  return runtime_.query(largest);
}

// Row sums in global row order, added in that order on every rank: the
// same bits on any number of ranks.
double HeatBlocks::heat_total() {
  double total = 0;
  if (runtime_.loop("heat_total", {{u_.id, Access::kRead}})) {
    std::vector<double> mine(static_cast<std::size_t>(rows_));
    for (int j = 0; j < rows_; ++j) {
      for (int i = 0; i < cols_; ++i) mine[static_cast<std::size_t>(j)] += row(u_, j)[i];
    }
    std::vector<int> counts(static_cast<std::size_t>(ranks_)), starts(static_cast<std::size_t>(ranks_));
    MPI_Allgather(&rows_, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (std::size_t r = 1; r < counts.size(); ++r) starts[r] = starts[r - 1] + counts[r - 1];
    std::vector<double> sums(static_cast<std::size_t>(options_.rows));
    MPI_Allgatherv(mine.data(), rows_, MPI_DOUBLE, sums.data(), counts.data(), starts.data(), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    for (const double each : sums) total += each;
  }
  return runtime_.query(total);
}

std::vector<double> HeatBlocks::gather_field() const {
  const int mine = rows_ * cols_;
  std::vector<int> counts(static_cast<std::size_t>(ranks_)), starts(static_cast<std::size_t>(ranks_));
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (std::size_t r = 1; r < counts.size(); ++r) starts[r] = starts[r - 1] + counts[r - 1];
  std::vector<double> field(rank_ == 0 ? static_cast<std::size_t>(options_.rows) * cols_ : 0);
  MPI_Gatherv(u_.values.data(), mine, MPI_DOUBLE, field.data(), counts.data(), starts.data(), MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  return field;
}

void print_result(const Options& options, const std::vector<double>& field, int checkpoints,
                  const std::optional<resurgo::autockpt::RestoreReport>& restore) {
  std::uint64_t hash = 14695981039346656037ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(field.data());
  for (std::size_t k = 0; k < field.size() * sizeof(double); ++k) hash = (hash ^ bytes[k]) * 1099511628211ull;
  std::string restored;
  if (restore) {
    restored = ", \"restore\": {\"version\": " + std::to_string(restore->version) +
               ", \"loop_index\": " + std::to_string(restore->loop_index) +
               ", \"skipped_loops\": " + std::to_string(restore->skipped_loops) +
               ", \"fast_forward\": " + (restore->fast_forward ? "true" : "false") +
               ", \"ranks\": " + std::to_string(restore->ranks) + "}";
  }
  std::printf("RESULT {\"ranks\": %d, \"steps\": %d, \"checksum\": \"%016llx\", \"checkpoints\": %d%s}\n",
              world(MPI_Comm_size), options.steps, static_cast<unsigned long long>(hash), checkpoints,
              restored.c_str());
  std::fflush(stdout);
  if (options.dump.empty()) return;
  std::ofstream out(options.dump, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(field.data()), static_cast<std::streamsize>(field.size() * sizeof(double)));
  if (!out.flush()) throw std::runtime_error("cannot write the --dump file " + options.dump);
}

void run(const Options& options) {
  resurgo::Config config = resurgo::Config::load();
  config.local.every = 1;
  config.persistent.every = 1;  // restart on another rank count reads L4
  resurgo::Store store("heat_blocks_mpi", config, resurgo::mpi_comm(MPI_COMM_WORLD));
  {
    resurgo::autockpt::Options automatic;
    automatic.agreement_loops = 4;  // once a step: a short run still meets the requests
    resurgo::autockpt::Runtime runtime(store, automatic);
    HeatBlocks app(options, store, runtime);
    app.run();
    const std::vector<double> field = app.gather_field();
    if (world(MPI_Comm_rank) == 0) print_result(options, field, app.checkpoints(), runtime.last_restore());
  }
  store.close();  // a background error of a checkpoint fails the run here
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options options = parse(argc, argv);
  if (options.rows < 2 * world(MPI_Comm_size) || options.cols < 1) usage("--rows must give each rank two rows");
  int status = 0;
  try {
    run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heat_blocks_mpi: rank %d: %s\n", world(MPI_Comm_rank), error.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
