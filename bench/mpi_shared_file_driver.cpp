// mpi_shared_file_driver: one run of bench/mpi_shared_file.py (issue 31,
// part 4), through the public C++ API. Started by mpirun; each rank holds
// --bytes bytes (an incompressible pattern that changes with the version)
// and rank 0 prints one JSON line with the job's times (the slowest rank's,
// between barriers).
//   --case per-rank | shared   an MPI store with L4 only (persistent.every 1,
//              keep 1, persistent.layout the case): checkpoint(1) then
//              wait(1, L4), timed: the version durable for the job; then a
//              fresh store's restart(), timed, and checked bit for bit.
//   --case floor               the same bytes written by each rank to a file
//              of its own with write() and fsync() (and the directory
//              fsynced): the least any layout can cost; read back with
//              read() for the restart figure.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

struct Options {
  std::string dir;
  std::string run_case;
  std::size_t bytes = 64u << 20;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "mpi_shared_file_driver: %s\nusage: mpirun -np P mpi_shared_file_driver --dir DIR "
               "--case per-rank|shared|floor [--bytes N]\n", why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--dir") options.dir = value;
    else if (key == "--case") options.run_case = value;
    else if (key == "--bytes") options.bytes = std::strtoull(value.c_str(), nullptr, 10);
    else usage("unknown option");
  }
  if (options.dir.empty()) usage("--dir is required");
  if (options.run_case != "per-rank" && options.run_case != "shared" && options.run_case != "floor") {
    usage("--case is per-rank, shared or floor");
  }
  if (options.bytes % 8 != 0) usage("--bytes must be a multiple of 8");
  return options;
}

int rank() {
  int value = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &value);
  return value;
}

std::uint64_t word(std::size_t index, int version) {
  std::uint64_t x = (index + 1) * 0x9E3779B97F4A7C15ULL ^ (static_cast<std::uint64_t>(rank()) << 40) ^ version;
  x ^= x >> 31;
  return x * 0xBF58476D1CE4E5B9ULL;
}

// Seconds the slowest rank took for `step`, started together.
template <class Step>
double job_seconds(Step step) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto started = std::chrono::steady_clock::now();
  step();
  double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

resurgo::Config config_of(const Options& options) {
  resurgo::Config config;
  config.memory.every = 0;
  config.local.every = 0;
  config.persistent.every = 1;
  config.persistent.keep = 1;
  config.persistent.path = options.dir + "/l4";
  config.persistent.layout =
      options.run_case == "shared" ? resurgo::FileLayout::kShared : resurgo::FileLayout::kPerRank;
  config.log.level = resurgo::LogLevel::kError;
  return config;
}

bool run_store(const Options& options, double& write_s, double& restart_s) {
  const resurgo::Config config = config_of(options);
  std::vector<std::uint64_t> state(options.bytes / 8);
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = word(i, 1);
  {
    resurgo::Store store("bench", config, resurgo::mpi_comm(MPI_COMM_WORLD));
    store.protect(0, state.data(), options.bytes, "state");
    write_s = job_seconds([&] {
      store.checkpoint(1);
      store.wait(1, resurgo::kL4);
    });
    store.close();
  }
  std::vector<std::uint64_t> restored(state.size());
  resurgo::Store store("bench", config, resurgo::mpi_comm(MPI_COMM_WORLD));
  store.protect(0, restored.data(), options.bytes, "state");
  restart_s = job_seconds([&] { store.restart(); });
  store.close();
  return restored == state;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::perror(what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

bool run_floor(const Options& options, double& write_s, double& restart_s) {
  std::vector<std::uint64_t> state(options.bytes / 8);
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = word(i, 1);
  const std::string path = options.dir + "/floor.r" + std::to_string(rank());
  write_s = job_seconds([&] {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    check(fd >= 0, "open");
    check(::write(fd, state.data(), options.bytes) == static_cast<ssize_t>(options.bytes), "write");
    check(::fsync(fd) == 0 && ::close(fd) == 0, "fsync");
    const int dir = ::open(options.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    check(dir >= 0 && ::fsync(dir) == 0 && ::close(dir) == 0, "fsync of the directory");
  });
  std::vector<std::uint64_t> restored(state.size());
  restart_s = job_seconds([&] {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    check(fd >= 0 && ::read(fd, restored.data(), options.bytes) == static_cast<ssize_t>(options.bytes), "read");
    ::close(fd);
  });
  return restored == state;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const Options options = parse(argc, argv);
  double write_s = 0;
  double restart_s = 0;
  int same = 0;
  try {
    same = (options.run_case == "floor" ? run_floor(options, write_s, restart_s)
                                        : run_store(options, write_s, restart_s)) ? 1 : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rank %d: %s\n", rank(), error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int all_same = 0;
  MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank() == 0) {
    std::printf("{\"case\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"write_s\": %.6f, \"restart_s\": %.6f, "
                "\"bit_for_bit\": %s}\n", options.run_case.c_str(), size, options.bytes, write_s, restart_s,
                all_same ? "true" : "false");
  }
  MPI_Finalize();
  return all_same ? 0 : 1;
}
