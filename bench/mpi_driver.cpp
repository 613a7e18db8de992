// mpi_driver: one run of bench/mpi.py (MPI stores, issue 12), through the
// public C++ API only. Started by mpirun; every rank runs the same steps and
// rank 0 prints one JSON line per measure, with one value per rank.
//
// Each rank holds a state of --bytes bytes in three arrays (1/2, 1/4, 1/4).
//   comm        the cost of one allreduce_min and one allgather (with the
//               store's mpi.timeout, the store's path) on a Comm of every
//               rank: --comm-iterations of each, back to back; per rank the
//               mean, and the slowest rank's is the job's.
//   checkpoint  two phases, in the order --first gives: a single-process
//               store per rank (Store(name, config), its own directories)
//               and the MPI store (Store(name, config, mpi_comm(...)), L2
//               under local.path ".../{node}", L4 shared). For each of
//               --checkpoints versions: the state is changed (one word per
//               page), --compute-seconds of sleep stand in for computing,
//               the ranks meet at a barrier (an application's own halo
//               exchange keeps them in step, so the store is not charged
//               with their imbalance), then checkpoint(v), wait(v, 2),
//               wait(v, 3) when the partner level exists, wait(v, 4). Per
//               rank: VersionStats' blocking and seconds_to_level (the
//               rank's own copy), the wall time from the checkpoint() call
//               until each wait() returned (the job's: wait returns once
//               every rank's copy and the job manifest are durable), the
//               levels' bytes and write times, and the Comm calls the store
//               made inside checkpoint() and inside the waits with the time
//               spent in them (the MPI store's Comm is mpi_comm(MPI_COMM_WORLD)
//               behind a counting wrapper).
//   storage     (--rebuild) bytes of every file under the node-local roots
//               of a store holding one version: L2 plus the partner level.
//   rebuild     (--rebuild) with partner.scheme set and L4 off: one
//               version, then restart() in a fresh store with every node's
//               L2 intact, then again after the last node's directory was
//               deleted; each timed (the slowest rank's), checked bit for
//               bit, and whether the lost node's L2 file was written back.
// Exit status 3 and "unavailable: REASON" on stderr when the configuration
// refuses partner.scheme (the partner level is not built).
//
// --mode write and --mode restart (bench/mpi_redistribution.py: restart on
// another number of ranks) instead run one step each on a float64 global
// array of --rows x --cols, split by rows (or by columns with --split cols)
// unevenly: rank r of n owns a share proportional to r + 1, so no block of
// one job lines up with a block of the other. Each rank protects its block
// with a GlobalBlock.
//   write       one version in DIR (L2 under DIR/write/{node}, L4 in
//               DIR/shared, pipeline.chunk_size --chunk-size), durable at L4,
//               then L2 removed.
//   restart     restart() in a fresh store (an empty L2, so every rank reads
//               L4, the level a job of another size reads from) into a
//               zeroed block, timed per rank from a barrier; per rank the
//               RestartReport's bytes, bytes_read and written_by_ranks, the
//               bytes read through system calls and from storage during
//               restart() (/proc/self/io), and every value checked bit for bit.
#include <mpi.h>

#include <array>
#include <bit>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "resurgo/comm.hpp"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kUnavailable = 3;
constexpr const char* kStoreName = "bench";

struct Options {
  std::string dir;
  std::size_t bytes = std::size_t{32} << 20;
  int checkpoints = 8;
  double compute_seconds = 0.05;
  int ranks_per_node = 1;
  std::string scheme = "none";  // none | partner | xor
  int set_size = 0;             // 0: the library's default
  std::string first = "single";
  int comm_iterations = 200;
  bool rebuild = false;
  std::string mode = "checkpoint";  // checkpoint | write | restart
  std::int64_t rows = 0;            // the global array of write and restart
  std::int64_t cols = 0;
  bool split_columns = false;
  std::size_t chunk_size = std::size_t{4} << 20;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "mpi_driver: %s\n"
               "usage: mpirun -np P mpi_driver --dir DIR [--bytes N] [--checkpoints N] [--compute-seconds S]\n"
               "         [--ranks-per-node K] [--scheme none|partner|xor] [--set-size N] [--first single|mpi]\n"
               "         [--comm-iterations N] [--rebuild]\n"
               "       mpirun -np P mpi_driver --mode write|restart --dir DIR --rows R --cols C [--split rows|cols]\n"
               "         [--chunk-size N] [--ranks-per-node K]\n",
               why.c_str());
  std::exit(64);
}

long positive(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (*end != '\0' || n < 1) usage(flag + " takes a positive integer");
  return n;
}

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rebuild") {
      opt.rebuild = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--dir") {
      opt.dir = value;
    } else if (arg == "--bytes") {
      opt.bytes = static_cast<std::size_t>(positive(arg, value));
    } else if (arg == "--checkpoints") {
      opt.checkpoints = static_cast<int>(positive(arg, value));
    } else if (arg == "--compute-seconds") {
      opt.compute_seconds = std::strtod(value.c_str(), nullptr);
    } else if (arg == "--ranks-per-node") {
      opt.ranks_per_node = static_cast<int>(positive(arg, value));
    } else if (arg == "--scheme") {
      if (value != "none" && value != "partner" && value != "xor") usage("--scheme is none, partner or xor");
      opt.scheme = value;
    } else if (arg == "--set-size") {
      opt.set_size = static_cast<int>(positive(arg, value));
    } else if (arg == "--first") {
      if (value != "single" && value != "mpi") usage("--first is single or mpi");
      opt.first = value;
    } else if (arg == "--comm-iterations") {
      opt.comm_iterations = static_cast<int>(positive(arg, value));
    } else if (arg == "--mode") {
      if (value != "checkpoint" && value != "write" && value != "restart") {
        usage("--mode is checkpoint, write or restart");
      }
      opt.mode = value;
    } else if (arg == "--rows") {
      opt.rows = positive(arg, value);
    } else if (arg == "--cols") {
      opt.cols = positive(arg, value);
    } else if (arg == "--split") {
      if (value != "rows" && value != "cols") usage("--split is rows or cols");
      opt.split_columns = value == "cols";
    } else if (arg == "--chunk-size") {
      opt.chunk_size = static_cast<std::size_t>(positive(arg, value));
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (opt.dir.empty()) usage("--dir is required");
  if (opt.bytes % (4 * sizeof(double)) != 0) usage("--bytes must be a multiple of 32");
  if (opt.rebuild && opt.scheme == "none") usage("--rebuild needs --scheme partner or xor");
  if (opt.mode != "checkpoint" && (opt.rows == 0 || opt.cols == 0)) {
    usage("--mode " + opt.mode + " needs --rows and --cols");
  }
  return opt;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// ------------------------------------------------------------------- the job
int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Every rank's `values` at rank 0, rank after rank (empty elsewhere).
std::vector<double> gather(const std::vector<double>& values) {
  std::vector<double> all(world_rank() == 0 ? values.size() * static_cast<std::size_t>(world_size()) : 0);
  MPI_Gather(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, all.data(), static_cast<int>(values.size()),
             MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return all;
}

double slowest(double mine) {
  double most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

bool on_every_rank(bool mine) {
  int all = 0;
  int value = mine ? 1 : 0;
  MPI_Allreduce(&value, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// A JSON array of the values of field `field` of `fields` values per rank.
std::string per_rank(const std::vector<double>& all, std::size_t fields, std::size_t field) {
  std::string out = "[";
  char number[32];
  for (std::size_t at = field; at < all.size(); at += fields) {
    std::snprintf(number, sizeof number, "%.9g", all[at]);
    out += (at == field ? "" : ", ") + std::string(number);
  }
  return out + "]";
}

// ------------------------------------------------------------------ counting
// The Comm calls a store makes and the time spent in them, counted on the
// way to the real communicator (its duplicates too: the store's background
// thread may talk on one).
struct CommCounts {
  static constexpr std::size_t kKinds = 9;
  using Calls = std::array<double, kKinds>;  // in the order of the fields "..._allreduce" to "..._p2p_seconds"
  std::atomic<long> allreduce{0}, allgather{0}, barrier{0}, messages{0}, message_bytes{0};
  // Nanoseconds inside each kind of call; point to point: sends and receives.
  std::atomic<long> allreduce_ns{0}, allgather_ns{0}, barrier_ns{0}, p2p_ns{0};

  Calls now() const {
    const auto seconds = [](const std::atomic<long>& ns) { return 1e-9 * static_cast<double>(ns.load()); };
    return {static_cast<double>(allreduce.load()), static_cast<double>(allgather.load()),
            static_cast<double>(barrier.load()), static_cast<double>(messages.load()),
            static_cast<double>(message_bytes.load()), seconds(allreduce_ns), seconds(allgather_ns),
            seconds(barrier_ns), seconds(p2p_ns)};
  }

  // Runs one Comm call, counting it in `calls` (when given) and its time in
  // `ns` (added by a destructor, so that calls returning nothing and calls
  // that throw count).
  template <typename Call>
  static auto count(std::atomic<long>* calls, std::atomic<long>& ns, Call&& call) {
    if (calls) ++*calls;
    struct AddTime {
      std::atomic<long>& total;
      Clock::time_point start = Clock::now();
      ~AddTime() { total += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(); }
    } add_time{ns};
    return call();
  }
};

class CountingComm final : public resurgo::Comm {
 public:
  CountingComm(std::shared_ptr<resurgo::Comm> inner, std::shared_ptr<CommCounts> counts)
      : inner_(std::move(inner)), counts_(std::move(counts)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int node() const override { return inner_->node(); }
  bool threads_may_call() const override { return inner_->threads_may_call(); }
  long allreduce_min(long value) override {
    return CommCounts::count(&counts_->allreduce, counts_->allreduce_ns, [&] { return inner_->allreduce_min(value); });
  }
  void barrier() override { CommCounts::count(&counts_->barrier, counts_->barrier_ns, [&] { inner_->barrier(); }); }
  void send(int to_rank, const void* data, std::size_t bytes) override {
    counts_->message_bytes += static_cast<long>(bytes);
    CommCounts::count(&counts_->messages, counts_->p2p_ns, [&] { inner_->send(to_rank, data, bytes); });
  }
  void receive(int from_rank, void* data, std::size_t bytes) override {
    CommCounts::count(nullptr, counts_->p2p_ns, [&] { inner_->receive(from_rank, data, bytes); });
  }
  void exchange(int to_rank, const void* out, std::size_t out_bytes, int from_rank, void* in,
                std::size_t in_bytes) override {
    counts_->message_bytes += static_cast<long>(out_bytes);
    CommCounts::count(&counts_->messages, counts_->p2p_ns,
                      [&] { inner_->exchange(to_rank, out, out_bytes, from_rank, in, in_bytes); });
  }
  // The store's job thread talks on the duplicate, concurrently with the
  // application's calls: it is not counted, so that the counts are the
  // application thread's.
  std::unique_ptr<resurgo::Comm> duplicate() override { return inner_->duplicate(); }
  std::vector<long> allgather(long value, double timeout_seconds) override {
    return CommCounts::count(&counts_->allgather, counts_->allgather_ns,
                             [&] { return inner_->allgather(value, timeout_seconds); });
  }

 private:
  std::shared_ptr<resurgo::Comm> inner_;
  std::shared_ptr<CommCounts> counts_;
};

// --------------------------------------------------------------------- state
// The rank's state: three arrays, so the store writes a region table of
// several regions as applications do.
class State {
 public:
  explicit State(std::size_t bytes) : doubles_(bytes / sizeof(double)), data_(new double[doubles_]) {
    const double rank = world_rank();
    for (std::size_t i = 0; i < doubles_; ++i) data_[i] = rank + 1e-6 * static_cast<double>(i);
  }

  void protect(resurgo::Store& store) const {
    const std::size_t half = doubles_ / 2;
    const std::size_t quarter = doubles_ / 4;
    const std::array<std::pair<std::size_t, std::size_t>, 3> arrays{{{0, half}, {half, quarter},
                                                                     {half + quarter, quarter}}};
    for (std::size_t id = 0; id < arrays.size(); ++id) {
      const auto [first, count] = arrays[id];
      store.protect(static_cast<int>(id), data_.get() + first, count * sizeof(double), "array" + std::to_string(id),
                    resurgo::ElementType{"float64", {static_cast<std::int64_t>(count)}});
    }
  }

  // The application's step: one word per page changes.
  void step() {
    const std::size_t stride = 4096 / sizeof(double);
    for (std::size_t i = 0; i < doubles_; i += stride) data_[i] += 1;
  }

  void clear() { std::memset(data_.get(), 0, bytes()); }
  bool equals(const State& other) const { return std::memcmp(data_.get(), other.data_.get(), bytes()) == 0; }
  std::size_t bytes() const { return doubles_ * sizeof(double); }

 private:
  std::size_t doubles_;
  std::unique_ptr<double[]> data_;
};

// ------------------------------------------------------------------- configs
std::string node_root(const std::string& dir) { return dir + "/nodes"; }

resurgo::Config mpi_config(const Options& opt, const std::string& dir, bool persistent) {
  std::map<std::string, std::string> overrides = {
      {"local.path", node_root(dir) + "/{node}"},
      {"persistent.path", dir + "/shared"},
      {"persistent.every", persistent ? "1" : "0"},
      {"mpi.ranks_per_node", std::to_string(opt.ranks_per_node)},
  };
  resurgo::Config config = resurgo::Config::load("", overrides);
  if (opt.scheme != "none") {
    config.set("partner.scheme", opt.scheme);  // ConfigError while the partner level is not built
    if (opt.set_size > 0) config.set("partner.set_size", std::to_string(opt.set_size));
  }
  return config;
}

resurgo::Config single_config(const std::string& dir) {
  const std::string own = dir + "/rank" + std::to_string(world_rank());
  return resurgo::Config::load("", {{"local.path", own + "/local"},
                                    {"persistent.path", own + "/shared"},
                                    {"persistent.every", "1"}});
}

// --------------------------------------------------------------- comm costs
void measure_comm(const Options& opt) {
  std::shared_ptr<resurgo::Comm> comm = resurgo::mpi_comm(MPI_COMM_WORLD);
  const double timeout = resurgo::Config::load().mpi.timeout;
  const auto mean_seconds = [&](auto&& call) {
    comm->barrier();
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < opt.comm_iterations; ++i) call(i);
    return slowest(seconds_since(start) / opt.comm_iterations);
  };
  const double allreduce = mean_seconds([&](int i) { comm->allreduce_min(i); });
  const double allgather = mean_seconds([&](int i) { comm->allgather(i, timeout); });
  const double barrier = mean_seconds([&](int) { comm->barrier(); });
  if (world_rank() == 0) {
    std::printf("{\"kind\": \"comm\", \"ranks\": %d, \"iterations\": %d, \"allreduce_seconds\": %.9g, "
                "\"allgather_seconds\": %.9g, \"barrier_seconds\": %.9g, \"timeout\": %g}\n",
                world_size(), opt.comm_iterations, allreduce, allgather, barrier, timeout);
    std::fflush(stdout);
  }
}

// ------------------------------------------------------------- checkpoints
// One row per rank and version: the fields below, in this order. The call
// counts are the Comm calls of CommCounts (and the seconds spent in them),
// inside checkpoint() and inside the waits.
const char* const kFields[] = {
    "blocking", "own_l2", "own_l3", "own_l4", "job_l2", "job_l3", "job_l4", "l2_bytes", "l2_write_seconds",
    "l3_bytes", "l3_write_seconds", "l4_bytes", "l4_write_seconds", "checkpoint_allreduce", "checkpoint_allgather",
    "checkpoint_barrier", "checkpoint_messages", "checkpoint_message_bytes", "checkpoint_allreduce_seconds",
    "checkpoint_allgather_seconds", "checkpoint_barrier_seconds", "checkpoint_p2p_seconds", "wait_allreduce",
    "wait_allgather", "wait_barrier", "wait_messages", "wait_message_bytes", "wait_allreduce_seconds",
    "wait_allgather_seconds", "wait_barrier_seconds", "wait_p2p_seconds", "copy_seconds", "first_touch_seconds",
    "backpressure_seconds"};
enum Field : std::size_t {
  kBlocking = 0,
  kOwnL2 = 1,       // own_l2, own_l3, own_l4
  kJobL2 = 4,       // job_l2, job_l3, job_l4
  kLevelBytes = 7,  // bytes and write seconds per level
  kCheckpointCalls = 13,
  kWaitCalls = kCheckpointCalls + CommCounts::kKinds,
  kCopy = kWaitCalls + CommCounts::kKinds,  // then first touch, backpressure: the parts of blocking the library names
};
constexpr std::size_t kFieldCount = sizeof kFields / sizeof kFields[0];
static_assert(kFieldCount == kCopy + 3, "kFields and Field disagree");
constexpr int kLevels[] = {resurgo::kL2, resurgo::kL3, resurgo::kL4};  // the order of the per-level fields

resurgo::VersionStats stats_of(resurgo::Store& store, int version) {
  for (const resurgo::VersionStats& stats : store.stats()) {
    if (stats.version == version) return stats;
  }
  throw std::runtime_error("no stats for version " + std::to_string(version));
}

// wait(version, level) and the seconds since `start` when it returned; -1
// when the store has no such level (wait refuses it).
double job_seconds(resurgo::Store& store, int version, int level, Clock::time_point start) {
  try {
    store.wait(version, level);
  } catch (const resurgo::InvalidArgumentError&) {
    return -1;
  }
  return seconds_since(start);
}

class Phase {
 public:
  Phase(const Options& opt, State& state, resurgo::Store& store, const CommCounts* counts)
      : opt_(opt), state_(state), store_(store), counts_(counts) {}

  // Takes every checkpoint; rank 0 prints a line per version.
  void run(const char* name) {
    for (int version = 1; version <= opt_.checkpoints; ++version) {
      state_.step();
      std::this_thread::sleep_for(std::chrono::duration<double>(opt_.compute_seconds));
      MPI_Barrier(MPI_COMM_WORLD);
      print(name, version, checkpoint(version));
    }
  }

 private:
  std::array<double, kFieldCount> checkpoint(int version) {
    std::array<double, kFieldCount> row{};
    const CommCounts::Calls before = counted();
    const Clock::time_point start = Clock::now();
    store_.checkpoint(version);
    const CommCounts::Calls after_checkpoint = counted();
    for (std::size_t i = 0; i < std::size(kLevels); ++i) {
      const bool exists = kLevels[i] != resurgo::kL3 || opt_.scheme != "none";
      row[kJobL2 + i] = exists ? job_seconds(store_, version, kLevels[i], start) : -1;
    }
    const CommCounts::Calls after_waits = counted();
    const resurgo::VersionStats stats = stats_of(store_, version);
    row[kBlocking] = stats.blocking_seconds;
    row[kCopy] = stats.copy_seconds;
    row[kCopy + 1] = stats.first_touch_seconds;
    row[kCopy + 2] = stats.backpressure_seconds;
    for (std::size_t i = 0; i < std::size(kLevels); ++i) {
      const resurgo::LevelStats* reached = stats.at(kLevels[i]);
      row[kOwnL2 + i] = reached ? reached->seconds_to_level : -1;
      row[kLevelBytes + 2 * i] = reached ? static_cast<double>(reached->stored_bytes) : 0;
      row[kLevelBytes + 2 * i + 1] = reached ? reached->write_seconds : 0;
    }
    for (std::size_t i = 0; i < CommCounts::kKinds; ++i) {
      row[kCheckpointCalls + i] = after_checkpoint[i] - before[i];
      row[kWaitCalls + i] = after_waits[i] - after_checkpoint[i];
    }
    return row;
  }

  CommCounts::Calls counted() const { return counts_ ? counts_->now() : CommCounts::Calls{}; }

  void print(const char* name, int version, const std::array<double, kFieldCount>& row) const {
    const std::vector<double> all = gather(std::vector<double>(row.begin(), row.end()));
    if (world_rank() != 0) return;
    std::string line = "{\"kind\": \"checkpoint\", \"store\": \"" + std::string(name) + "\", \"scheme\": \"" +
                       opt_.scheme + "\", \"ranks\": " + std::to_string(world_size()) +
                       ", \"version\": " + std::to_string(version) + ", \"state_bytes\": " +
                       std::to_string(state_.bytes());
    for (std::size_t field = 0; field < kFieldCount; ++field) {
      line += ", \"" + std::string(kFields[field]) + "\": " + per_rank(all, kFieldCount, field);
    }
    std::printf("%s}\n", line.c_str());
    std::fflush(stdout);
  }

  const Options& opt_;
  State& state_;
  resurgo::Store& store_;
  const CommCounts* counts_;
};

void single_phase(const Options& opt, State& state) {
  resurgo::Store store(kStoreName, single_config(opt.dir + "/single"));
  state.protect(store);
  Phase(opt, state, store, nullptr).run("single");
  store.close();
}

void mpi_phase(const Options& opt, State& state) {
  auto counts = std::make_shared<CommCounts>();
  auto comm = std::make_shared<CountingComm>(resurgo::mpi_comm(MPI_COMM_WORLD), counts);
  resurgo::Store store(kStoreName, mpi_config(opt, opt.dir + "/mpi", true), comm);
  state.protect(store);
  Phase(opt, state, store, counts.get()).run("mpi");
  store.close();
}

// ------------------------------------------------------------------ rebuild
std::uint64_t bytes_under(const std::string& root) {
  std::uint64_t bytes = 0;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

struct Restored {
  double seconds = 0;
  bool verified = false;
  int level = -1;
  std::string error;
};

// restart() in a fresh store (as a restarted job), into a cleared copy of
// the state, compared bit for bit with `expected`.
Restored restart_fresh(const Options& opt, const std::string& dir, const State& expected, int version) {
  State into(expected.bytes());
  into.clear();
  Restored out;
  try {
    resurgo::Store store(kStoreName, mpi_config(opt, dir, false), resurgo::mpi_comm(MPI_COMM_WORLD));
    into.protect(store);
    MPI_Barrier(MPI_COMM_WORLD);
    const Clock::time_point start = Clock::now();
    const int restored = store.restart();
    out.seconds = seconds_since(start);
    out.level = store.last_restart().level;
    out.verified = restored == version && into.equals(expected);
    store.close();
  } catch (const std::exception& error) {
    out.error = error.what();
  }
  return out;
}

std::string container_path(const std::string& dir, int node, int version) {
  char name[64];
  std::snprintf(name, sizeof name, "/%d/%s/v%010d.r%06d.rsg", node, kStoreName, version, world_rank());
  return node_root(dir) + name;
}

void print_restart(const char* kind, const Restored& restored, int lost_node, bool rewritten) {
  const std::vector<double> levels = gather({static_cast<double>(restored.level)});
  const double seconds = slowest(restored.seconds);
  const bool verified = on_every_rank(restored.verified);
  const bool all_rewritten = on_every_rank(rewritten);
  if (!restored.error.empty()) std::fprintf(stderr, "rank %d: %s: %s\n", world_rank(), kind, restored.error.c_str());
  if (world_rank() != 0) return;
  std::printf("{\"kind\": \"%s\", \"ranks\": %d, \"lost_node\": %d, \"seconds\": %.9g, \"verified\": %s, "
              "\"rewritten\": %s, \"levels\": %s}\n",
              kind, world_size(), lost_node, seconds, verified ? "true" : "false", all_rewritten ? "true" : "false",
              per_rank(levels, 1, 0).c_str());
  std::fflush(stdout);
}

void rebuild_phase(const Options& opt, State& state) {
  const std::string dir = opt.dir + "/rebuild";
  constexpr int kVersion = 1;
  {
    resurgo::Store store(kStoreName, mpi_config(opt, dir, false), resurgo::mpi_comm(MPI_COMM_WORLD));
    state.protect(store);
    store.checkpoint(kVersion);
    store.wait(kVersion, resurgo::kL2);
    job_seconds(store, kVersion, resurgo::kL3, Clock::now());
    store.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::printf("{\"kind\": \"storage\", \"scheme\": \"%s\", \"set_size\": %d, \"ranks\": %d, \"state_bytes\": %zu, "
                "\"node_local_bytes\": %llu}\n",
                opt.scheme.c_str(), opt.set_size, world_size(), state.bytes(),
                static_cast<unsigned long long>(bytes_under(node_root(dir))));
    std::fflush(stdout);
  }
  print_restart("restart_intact", restart_fresh(opt, dir, state, kVersion), -1, true);
  const int lost_node = (world_size() - 1) / opt.ranks_per_node;
  if (world_rank() == 0) fs::remove_all(node_root(dir) + "/" + std::to_string(lost_node));
  MPI_Barrier(MPI_COMM_WORLD);
  const Restored rebuilt = restart_fresh(opt, dir, state, kVersion);
  const int node = world_rank() / opt.ranks_per_node;
  print_restart("rebuild", rebuilt, lost_node, fs::exists(container_path(dir, node, kVersion)));
}

// ------------------------------------------------------------ redistribution
// [first, first + count) of `extent`: rank `rank` of `ranks`'s share, in
// proportion to rank + 1.
std::pair<std::int64_t, std::int64_t> uneven_share(std::int64_t extent, int rank, int ranks) {
  const auto bound = [&](std::int64_t k) { return extent * k * (k + 1) / (std::int64_t{ranks} * (ranks + 1)); };
  return {bound(rank), bound(rank + 1) - bound(rank)};
}

// This rank's block of the global array; element (i, j) holds i * cols + j
// + 0.25, so that a value in the wrong place, or a zero left, shows.
class Block {
 public:
  Block(const Options& opt, int rank, int ranks) : rows_(opt.rows), cols_(opt.cols) {
    const auto [first, count] = uneven_share(opt.split_columns ? opt.cols : opt.rows, rank, ranks);
    if (opt.split_columns) {
      offset_ = {0, first};
      shape_ = {opt.rows, count};
    } else {
      offset_ = {first, 0};
      shape_ = {count, opt.cols};
    }
    values_.assign(static_cast<std::size_t>(shape_[0] * shape_[1]), 0.0);
  }

  void fill() {
    for_each([](double& value, double expected) { value = expected; });
  }

  bool holds_expected() {
    bool same = true;
    for_each([&](double& value, double expected) {
      same = same && std::bit_cast<std::uint64_t>(value) == std::bit_cast<std::uint64_t>(expected);
    });
    return same;
  }

  void protect(resurgo::Store& store) {
    store.protect(0, values_.data(), bytes(), "field", resurgo::ElementType{"float64", shape_},
                  resurgo::GlobalBlock{{rows_, cols_}, offset_});
  }

  std::size_t bytes() const { return values_.size() * sizeof(double); }

 private:
  template <typename Visit>
  void for_each(Visit&& visit) {
    std::size_t at = 0;
    for (std::int64_t i = offset_[0]; i < offset_[0] + shape_[0]; ++i) {
      for (std::int64_t j = offset_[1]; j < offset_[1] + shape_[1]; ++j) {
        visit(values_[at++], static_cast<double>(i * cols_ + j) + 0.25);
      }
    }
  }

  std::int64_t rows_;
  std::int64_t cols_;
  std::vector<std::int64_t> offset_;
  std::vector<std::int64_t> shape_;
  std::vector<double> values_;
};

resurgo::Config redistribution_config(const Options& opt, const std::string& local_root) {
  resurgo::Config config = mpi_config(opt, opt.dir, true);
  config.set("local.path", local_root + "/{node}");
  config.set("pipeline.chunk_size", std::to_string(opt.chunk_size));
  return config;
}

// Removes a directory every rank's store has closed.
void remove_together(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

void write_phase(const Options& opt) {
  Block block(opt, world_rank(), world_size());
  block.fill();
  const std::string local = opt.dir + "/write";
  resurgo::Store store(kStoreName, redistribution_config(opt, local), resurgo::mpi_comm(MPI_COMM_WORLD));
  block.protect(store);
  store.checkpoint(1);
  store.wait(1, resurgo::kL4);
  const double stored = static_cast<double>(stats_of(store, 1).at(resurgo::kL4)->stored_bytes);
  store.close();
  remove_together(local);
  const std::vector<double> all = gather({static_cast<double>(block.bytes()), stored});
  if (world_rank() != 0) return;
  std::printf("{\"kind\": \"written\", \"ranks\": %d, \"bytes\": %s, \"l4_bytes\": %s}\n", world_size(),
              per_rank(all, 2, 0).c_str(), per_rank(all, 2, 1).c_str());
  std::fflush(stdout);
}

// Bytes this process read through system calls (rchar) and from storage
// (read_bytes), from /proc/self/io; zeros where there is none.
std::array<double, 2> io_counters() {
  std::array<double, 2> counters{};
  std::FILE* io = std::fopen("/proc/self/io", "r");
  if (io == nullptr) return counters;
  char name[64];
  unsigned long long value = 0;
  while (std::fscanf(io, "%63s %llu", name, &value) == 2) {
    if (std::string_view(name) == "rchar:") counters[0] = static_cast<double>(value);
    if (std::string_view(name) == "read_bytes:") counters[1] = static_cast<double>(value);
  }
  std::fclose(io);
  return counters;
}

const char* const kRestartFields[] = {"seconds", "bytes", "bytes_read", "written_by_ranks", "syscall_read_bytes",
                                      "storage_read_bytes", "verified", "version", "level"};

void restart_phase(const Options& opt) {
  Block block(opt, world_rank(), world_size());
  const std::string local = opt.dir + "/restart";
  resurgo::Store store(kStoreName, redistribution_config(opt, local), resurgo::mpi_comm(MPI_COMM_WORLD));
  block.protect(store);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::array<double, 2> before = io_counters();
  const Clock::time_point start = Clock::now();
  const int version = store.restart();
  const double seconds = seconds_since(start);
  const std::array<double, 2> after = io_counters();
  const resurgo::RestartReport report = store.last_restart();
  store.close();
  remove_together(local);
  const std::vector<double> row = {seconds,
                                   static_cast<double>(report.bytes),
                                   static_cast<double>(report.bytes_read),
                                   static_cast<double>(report.written_by_ranks),
                                   after[0] - before[0],
                                   after[1] - before[1],
                                   block.holds_expected() ? 1.0 : 0.0,
                                   static_cast<double>(version),
                                   static_cast<double>(report.level)};
  const std::vector<double> all = gather(row);
  if (world_rank() != 0) return;
  std::string line = "{\"kind\": \"restart\", \"ranks\": " + std::to_string(world_size());
  for (std::size_t field = 0; field < std::size(kRestartFields); ++field) {
    line += ", \"" + std::string(kRestartFields[field]) + "\": " + per_rank(all, row.size(), field);
  }
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

void run(const Options& opt) {
  if (world_rank() == 0) fs::create_directories(opt.dir);
  if (opt.mode != "checkpoint") {
    MPI_Barrier(MPI_COMM_WORLD);
    opt.mode == "write" ? write_phase(opt) : restart_phase(opt);
    return;
  }
  mpi_config(opt, opt.dir + "/mpi", true);  // refuses an unknown scheme before any store opens
  MPI_Barrier(MPI_COMM_WORLD);
  State state(opt.bytes);
  measure_comm(opt);
  if (opt.first == "single") {
    single_phase(opt, state);
    mpi_phase(opt, state);
  } else {
    mpi_phase(opt, state);
    single_phase(opt, state);
  }
  if (opt.rebuild) rebuild_phase(opt, state);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const Options opt = parse(argc, argv);
  int status = 0;
  try {
    run(opt);
  } catch (const resurgo::ConfigError& error) {
    const bool unavailable = std::string_view(error.what()).find("partner") != std::string_view::npos;
    std::fprintf(stderr, "%s: %s\n", unavailable ? "unavailable" : "mpi_driver", error.what());
    status = unavailable ? kUnavailable : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "mpi_driver: rank %d: %s\n", world_rank(), error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may wait in a collective
  }
  MPI_Finalize();
  return status;
}
