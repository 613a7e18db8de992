// tealeaf_mpi: a TeaLeaf-like heat conduction code decomposed over MPI
// ranks, checkpointed by the automatic runtime (docs/auto.md, "MPI jobs";
// issue 31 part 1). The global N x N grid is cut in blocks of rows; each
// rank's fields carry a ring of one cell, filled by halo exchanges
// (MPI_Sendrecv with the ranks above and below) or by reflection at the
// domain's edges, and each exchange is a loop declared to the runtime. An
// implicit (backward Euler) step is solved by conjugate gradients whose
// reductions are summed in rank order (bit-identical from run to run) and
// go through query(). The store is opened on MPI_COMM_WORLD: the ranks agree
// on when and where to checkpoint through it.
//
//   mpirun -n P tealeaf_mpi [--size N] [--rows R] [--steps S] [--mode initphase|fastfw]
//       [--checkpoint-every E] [--checkpoints synchronous|offload|in-memory]
//       [--kill-step K | --kill-loop L | --kill-checkpoint C] [--kill-rank R]
//       [--fault datasets|loops|stall] [--dump PREFIX]
//
//   --rows R              the global grid is R x N (default N x N): bench/auto.py
//                         keeps R / P rows per rank to compare rank counts
//   --checkpoint-every E  rank 0 alone calls trigger() at the top of every
//                         E-th step: the agreement tells the other ranks
//   --checkpoints WHERE   where a checkpoint goes (bench/auto.py --mpi): L2
//                         through the store's background pipeline (offload,
//                         the default), L2 written before the runtime lets
//                         the application go on (synchronous), or L1 only
//                         (in-memory)
//   --kill-step K         at the top of step K, once a checkpoint was taken,
//                         every rank waits until it is on L2 and rank R
//                         kills itself by SIGKILL (R = -1: every rank)
//   --kill-loop L         rank R kills itself right before its L-th loop,
//                         wherever that falls (a checkpoint's region, an
//                         agreement, the store's commit of a version)
//   --kill-checkpoint C   rank R kills itself right after the runtime's C-th
//                         checkpoint returned on it: the other ranks' files
//                         of that version may be written, the job's never is;
//                         every rank first waits there until the version
//                         before it is the job's (on L2, or L1 in memory), so
//                         that the job has one to restore however far the
//                         background work lagged
//   --fault datasets      rank 1 declares two datasets in the other order
//   --fault loops         rank 1 runs one loop more in step 2
//   --fault stall         rank 1 stops for 1.5 s before its loop 384, where
//                         the others exchange (set RESURGO_MPI_TIMEOUT=1)
//   --dump PREFIX         each rank writes its datasets' final bytes to PREFIX.<rank>
//
// The store's levels come from the environment (RESURGO_LOCAL_PATH with
// {node}, RESURGO_MPI_RANKS_PER_NODE, RESURGO_MPI_TIMEOUT ...). Rank 0
// prints one line: RESULT {"ranks", "steps", "checksum" (of every rank's
// datasets, in rank order), "checkpoints" (taken by this run),
// "iteration_seconds" (rank 0's median time step), "blocking_seconds",
// "copy_seconds" and "saved_bytes" (per checkpoint: the longest any rank
// was held; the longest any rank took to copy its datasets' bytes by hand
// at the next loop, the floor of a checkpoint at that point of the job;
// the bytes all ranks saved), and when the run restored "restore":
// {version, loop_index, skipped_loops, fast_forward}}.
#include <mpi.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "checkpoint_route.h"
#include "mpi_rows.h"
#include "resurgo/auto.hpp"
#include "resurgo/mpi.hpp"

namespace {

using resurgo::autockpt::Access;
using resurgo::autockpt::Arg;
using resurgo::autockpt::Range;

constexpr double kTimeStep = 0.04;
constexpr double kEpsilon = 1e-10;   // CG stops when |r| falls below this fraction of its start
constexpr int kMaxIterations = 500;
constexpr long kStallLoop = 384;     // a multiple of Options::agreement_loops (64): an exchange

struct Options {
  int size = 64;
  int rows = 0;  // 0: size
  int steps = 8;
  std::string checkpoints = "offload";
  bool fastfw = false;
  int checkpoint_every = 0;
  int kill_step = -1;
  long kill_loop = -1;
  int kill_checkpoint = -1;
  int kill_rank = -1;
  std::string fault;
  std::string dump;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "tealeaf_mpi: %s\nusage: tealeaf_mpi [--size N] [--rows R] [--steps S] [--mode initphase|fastfw]\n"
               "       [--checkpoint-every E] [--checkpoints synchronous|offload|in-memory]\n"
               "       [--kill-step K | --kill-loop L | --kill-checkpoint C]\n"
               "       [--kill-rank R]\n"
               "       [--fault datasets|loops|stall] [--dump PREFIX]\n",
               why.c_str());
  std::exit(2);
}

long parse_number(const std::string& option, std::string_view text, long min) {
  long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min) {
    usage(option + " takes an integer >= " + std::to_string(min) + ", not '" + std::string(text) + "'");
  }
  return value;
}

bool checkpoint_target(std::string_view value) {
  return value == "synchronous" || value == "offload" || value == "in-memory";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string option = argv[i];
    if (i + 1 >= argc) usage("missing value after " + option);
    const std::string_view value = argv[i + 1];
    if (option == "--size") o.size = static_cast<int>(parse_number(option, value, 2));
    else if (option == "--rows") o.rows = static_cast<int>(parse_number(option, value, 2));
    else if (option == "--checkpoints" && checkpoint_target(value)) o.checkpoints = value;
    else if (option == "--steps") o.steps = static_cast<int>(parse_number(option, value, 1));
    else if (option == "--mode" && (value == "initphase" || value == "fastfw")) o.fastfw = value == "fastfw";
    else if (option == "--checkpoint-every") o.checkpoint_every = static_cast<int>(parse_number(option, value, 0));
    else if (option == "--kill-step") o.kill_step = static_cast<int>(parse_number(option, value, 1));
    else if (option == "--kill-loop") o.kill_loop = parse_number(option, value, 1);
    else if (option == "--kill-checkpoint") o.kill_checkpoint = static_cast<int>(parse_number(option, value, 1));
    else if (option == "--kill-rank") o.kill_rank = static_cast<int>(parse_number(option, value, -1));
    else if (option == "--fault" && (value == "datasets" || value == "loops" || value == "stall")) o.fault = value;
    else if (option == "--dump") o.dump = value;
    else usage("unknown option or value: " + option + " " + std::string(value));
  }
  if (o.rows == 0) o.rows = o.size;
  return o;
}

// A field of this rank's rows with a ring of one cell: (rows + 2) x (n + 2).
struct Field {
  int rows = 0, n = 0;
  std::vector<double> values;
  int id = -1;
  double& at(int j, int i) { return values[static_cast<std::size_t>(j + 1) * (n + 2) + (i + 1)]; }
  double at(int j, int i) const { return values[static_cast<std::size_t>(j + 1) * (n + 2) + (i + 1)]; }
  double* row(int j) { return &at(j, -1); }
};

Arg reads(const Field& f, Range range = Range::kInterior) { return {f.id, Access::kRead, range}; }
Arg writes(const Field& f, Range range = Range::kInterior) { return {f.id, Access::kWrite, range}; }
Arg updates(const Field& f) { return {f.id, Access::kReadWrite, Range::kInterior}; }

// Where this run is: the step and the simulated time (fastfw's payload).
struct Payload {
  double time = 0;
  std::int64_t step = 1;
};

class TeaLeafMpi {
 public:
  TeaLeafMpi(const Options& options, resurgo::Store& store, resurgo::autockpt::Runtime& runtime);
  void run();
  std::uint64_t checksum() const;
  void dump(const std::string& prefix) const;
  int checkpoints() const { return checkpoints_; }  // taken by this run
  const std::vector<resurgo::autockpt::CheckpointReport>& made() const { return made_; }  // by this rank
  const std::vector<double>& copy_seconds() const { return copy_seconds_; }  // per checkpoint made
  double median_step_seconds() const;  // of the steps run, not replayed

 private:
  Field& field(const std::string& name);
  bool loop(std::string_view name, std::initializer_list<Arg> args);
  void step_begins(Payload& where);
  void initialise();
  void time_step();
  void solve();
  double sum(std::string_view name, const Field& a, const Field& b);
  double global_sum(double mine) const;
  void update_halo(const std::string& name, Field& f);
  double apply(const Field& x, int j, int i) const;
  template <class Kernel>
  void over_interior(Kernel&& kernel) const {
    for (int j = 0; j < rows_; ++j) {
      for (int i = 0; i < n_; ++i) kernel(j, i);
    }
  }

  void count_checkpoints();
  void copy_datasets_by_hand();
  void kill_at_checkpoint();
  bool dies_here() const { return options_.kill_rank < 0 || options_.kill_rank == rank_; }

  const Options& options_;
  resurgo::Store& store_;
  resurgo::autockpt::Runtime& runtime_;
  int rank_ = 0, ranks_ = 1;
  int n_ = 0, rows_ = 0, first_row_ = 0;
  long loops_called_ = 0;
  int checkpoints_ = 0;
  bool kill_checkpoint_reached_ = false;
  std::vector<resurgo::autockpt::CheckpointReport> made_;
  std::vector<double> copy_seconds_;
  std::vector<double> copied_;  // copy_datasets_by_hand's destination, kept from one checkpoint to the next
  std::vector<double> step_seconds_;
  int last_version_ = -1;
  std::vector<std::unique_ptr<Field>> fields_;  // in declaration order
  Field *density_ = nullptr, *energy_ = nullptr;
  Field &u_, &u0_, &r_, &p_, &w_;
  double energy_total_ = 0;  // the last field summary
};

TeaLeafMpi::TeaLeafMpi(const Options& options, resurgo::Store& store, resurgo::autockpt::Runtime& runtime)
    : options_(options),
      store_(store),
      runtime_(runtime),
      rank_(world(MPI_Comm_rank)),
      ranks_(world(MPI_Comm_size)),
      n_(options.size),
      rows_(row_block(options.rows, rank_, ranks_).rows),
      first_row_(row_block(options.rows, rank_, ranks_).first),
      density_(options.fault == "datasets" && rank_ == 1 ? nullptr : &field("density")),
      energy_(&field("energy")),
      u_(field("u")),
      u0_(field("u0")),
      r_(field("vector_r")),
      p_(field("vector_p")),
      w_(field("vector_w")) {
  if (density_ == nullptr) density_ = &field("density");  // the fault: declared after the others
}

Field& TeaLeafMpi::field(const std::string& name) {
  auto f = std::make_unique<Field>();
  f->rows = rows_;
  f->n = n_;
  f->values.assign(static_cast<std::size_t>(rows_ + 2) * static_cast<std::size_t>(n_ + 2), 0.0);
  const resurgo::ElementType type{"float64", {rows_ + 2, n_ + 2}};
  f->id = runtime_.dataset(name, f->values.data(), f->values.size() * sizeof(double), type, 1);
  fields_.push_back(std::move(f));
  return *fields_.back();
}

// Every rank reaches its C-th checkpoint at the same loop (the agreement
// puts the region there on all): the wait is collective.
void TeaLeafMpi::kill_at_checkpoint() {
  kill_checkpoint_reached_ = true;
  if (made_.size() >= 2) {
    store_.wait(made_[made_.size() - 2].version, options_.checkpoints == "in-memory" ? resurgo::kL1 : resurgo::kL2);
  }
  if (dies_here()) std::raise(SIGKILL);
}

void TeaLeafMpi::count_checkpoints() {
  const auto made = runtime_.last_checkpoint();
  if (!made || made->version == last_version_) return;
  ++checkpoints_;
  last_version_ = made->version;
  made_.push_back(*made);
  copy_datasets_by_hand();
}

// What a checkpoint of this rank's datasets costs at least: one memcpy of
// their bytes into memory that is already there, timed where the job is
// (the loop after the checkpoint), so that on an oversubscribed machine it
// waits for a core as the checkpoint did.
void TeaLeafMpi::copy_datasets_by_hand() {
  std::size_t values = 0;
  for (const auto& f : fields_) values += f->values.size();
  copied_.resize(values);
  const auto started = std::chrono::steady_clock::now();
  double* to = copied_.data();
  for (const auto& f : fields_) to = std::copy(f->values.begin(), f->values.end(), to);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  copy_seconds_.push_back(took.count());
}

// Every loop goes through here: the kill points of --kill-loop and --kill-checkpoint.
bool TeaLeafMpi::loop(std::string_view name, std::initializer_list<Arg> args) {
  ++loops_called_;
  if (loops_called_ == options_.kill_loop && dies_here()) std::raise(SIGKILL);
  count_checkpoints();
  if (checkpoints_ == options_.kill_checkpoint && !kill_checkpoint_reached_) kill_at_checkpoint();
  if (options_.fault == "stall" && rank_ == 1 && loops_called_ == kStallLoop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  return runtime_.loop(name, args);
}

void TeaLeafMpi::run() {
  initialise();
  runtime_.initphase_done();
  Payload where;
  for (; where.step <= options_.steps; ++where.step) {
    const auto started = std::chrono::steady_clock::now();
    const bool replaying = runtime_.restoring();
    step_begins(where);
    time_step();
    where.time += kTimeStep;
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    if (!replaying) step_seconds_.push_back(took.count());
  }
  count_checkpoints();
  if (rank_ == 0) std::printf("field summary at t=%.3f: internal energy %.12e\n", where.time, energy_total_);
}

// The kill point of --kill-step, rank 0's checkpoint request, and fastfw
// (which, when restoring, moves `where` to the checkpoint's step).
void TeaLeafMpi::step_begins(Payload& where) {
  if (options_.kill_step > 0 && where.step >= options_.kill_step && runtime_.last_checkpoint()) {
    // Collective: the version is the job's on L2 (in memory: on L1, with its partner copies when kept so).
    store_.wait(resurgo::kAllVersions, options_.checkpoints == "in-memory" ? resurgo::kL1 : resurgo::kL2);
    if (dies_here()) std::raise(SIGKILL);
    // the other ranks go on until mpirun, which saw the death, ends them
  }
  if (rank_ == 0 && options_.checkpoint_every > 0 && where.step % options_.checkpoint_every == 0 &&
      !runtime_.restoring()) {
    runtime_.trigger();
  }
  if (options_.fastfw) runtime_.fastfw(&where, sizeof where);
  if (options_.fault == "loops" && rank_ == 1 && where.step == 2) loop("extra_norm", {reads(*energy_)});
}

// A hot rectangle at one end of a conducting (low-density) pipe through a
// dense cold domain of 10 x 10, TeaLeaf's benchmark deck made simpler.
void TeaLeafMpi::initialise() {
  const double dx = 10.0 / n_;
  const auto inside = [&](int j, int i, double xmin, double xmax, double ymin, double ymax) {
    const double x = (i + 0.5) * dx, y = (first_row_ + j + 0.5) * dx;
    return x >= xmin && x < xmax && y >= ymin && y < ymax;
  };
  if (loop("init_density", {writes(*density_)})) {
    over_interior([&](int j, int i) {
      const bool pipe = inside(j, i, 0, 6, 1, 2) || inside(j, i, 5, 6, 1, 8) || inside(j, i, 5, 10, 7, 8);
      density_->at(j, i) = pipe ? 0.1 : 100.0;
    });
  }
  if (loop("init_energy", {writes(*energy_)})) {
    over_interior([&](int j, int i) { energy_->at(j, i) = inside(j, i, 0, 1, 1, 2) ? 25.0 : 0.0001; });
  }
  update_halo("density", *density_);
}

void TeaLeafMpi::time_step() {
  solve();
  if (loop("finalise", {reads(u_), reads(*density_), writes(*energy_)})) {
    over_interior([&](int j, int i) { energy_->at(j, i) = u_.at(j, i) / density_->at(j, i); });
  }
  energy_total_ = sum("field_summary", *density_, *energy_);
}

// Solves A u = u0 (u0: the temperature before the step) by conjugate
// gradients; the iteration count depends on queried values only.
void TeaLeafMpi::solve() {
  if (loop("init_u", {reads(*energy_), reads(*density_), writes(u_), writes(u0_)})) {
    over_interior([&](int j, int i) { u_.at(j, i) = u0_.at(j, i) = energy_->at(j, i) * density_->at(j, i); });
  }
  update_halo("u", u_);
  if (loop("calc_residual", {reads(u_, Range::kAll), reads(u0_), reads(*density_, Range::kAll), writes(w_), writes(r_)})) {
    over_interior([&](int j, int i) {
      w_.at(j, i) = apply(u_, j, i);
      r_.at(j, i) = u0_.at(j, i) - w_.at(j, i);
    });
  }
  if (loop("cg_init_p", {reads(r_), writes(p_)})) {
    over_interior([&](int j, int i) { p_.at(j, i) = r_.at(j, i); });
  }
  double rro = sum("cg_init_rro", r_, r_);
  const double initial = std::sqrt(rro);
  for (int iteration = 0; iteration < kMaxIterations && rro > 0; ++iteration) {
    update_halo("p", p_);
    if (loop("cg_calc_w", {reads(p_, Range::kAll), reads(*density_, Range::kAll), writes(w_)})) {
      over_interior([&](int j, int i) { w_.at(j, i) = apply(p_, j, i); });
    }
    const double alpha = rro / sum("cg_calc_pw", p_, w_);
    if (loop("cg_calc_ur", {reads(p_), reads(w_), updates(u_), updates(r_)})) {
      over_interior([&](int j, int i) {
        u_.at(j, i) += alpha * p_.at(j, i);
        r_.at(j, i) -= alpha * w_.at(j, i);
      });
    }
    const double rrn = sum("cg_calc_rrn", r_, r_);
    const double beta = rrn / rro;
    if (loop("cg_calc_p", {reads(r_), updates(p_)})) {
      over_interior([&](int j, int i) { p_.at(j, i) = r_.at(j, i) + beta * p_.at(j, i); });
    }
    rro = rrn;
    if (std::sqrt(rrn) < kEpsilon * initial) break;
  }
}

// The dot product of a and b over the whole grid: the reduction is part of
// the loop (skipped while replaying) and its result a query.
double TeaLeafMpi::sum(std::string_view name, const Field& a, const Field& b) {
  double total = 0;
  if (loop(name, {reads(a), reads(b)})) {
    double mine = 0;
    over_interior([&](int j, int i) { mine += a.at(j, i) * b.at(j, i); });
    total = global_sum(mine);
  }
  return runtime_.query(total);
}

// Every rank's partial sum, added in rank order: the same bits in every run
// on this number of ranks (an MPI_Allreduce may add in any order).
double TeaLeafMpi::global_sum(double mine) const {
  std::vector<double> partial(static_cast<std::size_t>(ranks_));
  MPI_Allgather(&mine, 1, MPI_DOUBLE, partial.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  double total = 0;
  for (const double each : partial) total += each;
  return total;
}

// The ring: the neighbours' edge rows across ranks, reflection at the
// domain's edges (no flux through them).
void TeaLeafMpi::update_halo(const std::string& name, Field& f) {
  if (!loop("update_halo_" + name, {reads(f), writes(f, Range::kHalo)})) return;
  for (int j = 0; j < rows_; ++j) {
    f.at(j, -1) = f.at(j, 0);
    f.at(j, n_) = f.at(j, n_ - 1);
  }
  const int up = rank_ > 0 ? rank_ - 1 : MPI_PROC_NULL;
  const int down = rank_ + 1 < ranks_ ? rank_ + 1 : MPI_PROC_NULL;
  const int width = n_ + 2;
  MPI_Sendrecv(f.row(0), width, MPI_DOUBLE, up, 0, f.row(rows_), width, MPI_DOUBLE, down, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(f.row(rows_ - 1), width, MPI_DOUBLE, down, 1, f.row(-1), width, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  if (up == MPI_PROC_NULL) std::copy_n(f.row(0), width, f.row(-1));
  if (down == MPI_PROC_NULL) std::copy_n(f.row(rows_ - 1), width, f.row(rows_));
}

// (A x)(j, i) of the implicit step (I - dt div K grad) x, with the
// conductivity 1 / density averaged on each face.
double TeaLeafMpi::apply(const Field& x, int j, int i) const {
  const double dx = 10.0 / n_, scale = kTimeStep / (dx * dx);
  const Field& d = *density_;
  const auto face = [&](int j2, int i2) { return scale * (1 / d.at(j, i) + 1 / d.at(j2, i2)) / 2; };
  const double west = face(j, i - 1), east = face(j, i + 1), south = face(j - 1, i), north = face(j + 1, i);
  return (1 + west + east + south + north) * x.at(j, i) - west * x.at(j, i - 1) - east * x.at(j, i + 1) -
         south * x.at(j - 1, i) - north * x.at(j + 1, i);
}

std::uint64_t TeaLeafMpi::checksum() const {
  std::uint64_t hash = 14695981039346656037ull;
  for (const auto& f : fields_) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(f->values.data());
    for (std::size_t k = 0; k < f->values.size() * sizeof(double); ++k) hash = (hash ^ bytes[k]) * 1099511628211ull;
  }
  return hash;
}

double TeaLeafMpi::median_step_seconds() const {
  if (step_seconds_.empty()) return 0;
  std::vector<double> sorted = step_seconds_;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

void TeaLeafMpi::dump(const std::string& prefix) const {
  std::ofstream out(prefix + "." + std::to_string(rank_), std::ios::binary | std::ios::trunc);
  for (const auto& f : fields_) {
    out.write(reinterpret_cast<const char*>(f->values.data()),
              static_cast<std::streamsize>(f->values.size() * sizeof(double)));
  }
  if (!out.flush()) throw std::runtime_error("cannot write the --dump file " + prefix + "." + std::to_string(rank_));
}

std::string json_list(const std::vector<double>& values) {
  std::string text = "[";
  for (const double each : values) {
    char number[32];
    std::snprintf(number, sizeof number, "%s%.9g", text.size() > 1 ? ", " : "", each);
    text += number;
  }
  return text + "]";
}

// The RESULT line's figures of the checkpoints (collective; the text on
// rank 0): per checkpoint, the longest any rank was held (the job waits
// for its slowest rank at the next exchange) and the bytes all ranks saved.
std::string checkpoint_figures(const TeaLeafMpi& app) {
  int count = static_cast<int>(app.made().size());
  MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  std::vector<double> blocking(static_cast<std::size_t>(count)), saved(blocking.size());
  std::vector<double> copy(app.copy_seconds().begin(), app.copy_seconds().begin() + count);
  for (std::size_t k = 0; k < blocking.size(); ++k) {
    const auto& made = app.made()[k];
    blocking[k] = made.blocking_seconds;
    saved[k] = static_cast<double>(made.dataset_bytes + made.query_log_bytes + made.payload_bytes);
  }
  const bool root = world(MPI_Comm_rank) == 0;
  MPI_Reduce(root ? MPI_IN_PLACE : blocking.data(), blocking.data(), count, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(root ? MPI_IN_PLACE : copy.data(), copy.data(), count, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(root ? MPI_IN_PLACE : saved.data(), saved.data(), count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  return ", \"iteration_seconds\": " + std::to_string(app.median_step_seconds()) +
         ", \"blocking_seconds\": " + json_list(blocking) + ", \"copy_seconds\": " + json_list(copy) +
         ", \"saved_bytes\": " + json_list(saved);
}

// Rank 0's RESULT line: every rank's checksum combined in rank order.
void print_result(const Options& options, const TeaLeafMpi& app, int checkpoints,
                  const std::optional<resurgo::autockpt::RestoreReport>& restore) {
  const std::string figures = checkpoint_figures(app);
  const std::uint64_t mine = app.checksum();
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world(MPI_Comm_size)));
  MPI_Gather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (world(MPI_Comm_rank) != 0) return;
  std::uint64_t hash = 14695981039346656037ull;
  for (const std::uint64_t each : all) hash = (hash ^ each) * 1099511628211ull;
  std::string restored;
  if (restore) {
    restored = ", \"restore\": {\"version\": " + std::to_string(restore->version) +
               ", \"loop_index\": " + std::to_string(restore->loop_index) +
               ", \"skipped_loops\": " + std::to_string(restore->skipped_loops) +
               ", \"fast_forward\": " + (restore->fast_forward ? "true" : "false") + "}";
  }
  std::printf("RESULT {\"ranks\": %zu, \"steps\": %d, \"checksum\": \"%016llx\", \"checkpoints\": %d%s%s}\n",
              all.size(), options.steps, static_cast<unsigned long long>(hash), checkpoints, figures.c_str(),
              restored.c_str());
  std::fflush(stdout);
}

void run(const Options& options) {
  resurgo::Config config = resurgo::Config::load();
  config.local.every = 1;  // every checkpoint on L2, none on L4: the tests kill and restart on one machine
  config.local.keep = 2;
  config.persistent.every = 0;
  route_checkpoints(config, options.checkpoints == "in-memory", options.checkpoints == "synchronous");
  resurgo::Store store("tealeaf_mpi", config, resurgo::mpi_comm(MPI_COMM_WORLD));
  {
    resurgo::autockpt::Runtime runtime(store);
    TeaLeafMpi app(options, store, runtime);
    app.run();
    print_result(options, app, app.checkpoints(), runtime.last_restore());
    if (!options.dump.empty()) app.dump(options.dump);
  }
  store.close();  // a background error of a checkpoint fails the run here
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options options = parse(argc, argv);
  int status = 0;
  if (options.rows < world(MPI_Comm_size)) usage("--rows (or --size) must be at least the number of ranks");
  try {
    run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tealeaf_mpi: rank %d: %s\n", world(MPI_Comm_rank), error.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
