// MPI stores under mpirun (issue 12): each scenario is one run of a job;
// tests/mpi/CMakeLists.txt chains them (a run that writes, a run that
// restarts) and kills ranks in the crash campaign. The directories come from
// the environment (RESURGO_LOCAL_PATH with "{node}", RESURGO_PERSISTENT_PATH,
// RESURGO_MPI_RANKS_PER_NODE). Exits 0 when every check held on every rank.
//
//   mpi_store_check write VERSIONS          checkpoint versions 1..VERSIONS, durable on L4
//   mpi_store_check verify VERSION          restart; the newest version must be VERSION
//   mpi_store_check verify-at-least VERSION restart; the version must be VERSION or newer
//   mpi_store_check crash RANK VERSIONS [DELAY_US]
//                                           like write, but RANK dies (SIGKILL) DELAY_US after
//                                           checkpoint(VERSIONS) returned (0: at once)
//   mpi_store_check different-versions      ranks name different versions: an error on every rank
//   mpi_store_check missing-rank            the last rank never checkpoints: the others fail naming it
//   mpi_store_check write-global VERSION    a global array split by rows unevenly over the ranks
//   mpi_store_check verify-global VERSION   restart it on this job's rank count (any)
#include <mpi.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpi_checks.h"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

using namespace resurgo::mpi_checks;

double value(int version, int rank, std::size_t index) {
  return version * 1e6 + rank * 1e3 + static_cast<double>(index % 1000);
}

struct Job {
  resurgo::Store store{"mpi-check", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD)};
  std::vector<double> state = std::vector<double>(1u << 16);
  Job() { store.protect(0, state.data(), state.size() * sizeof(double), "state"); }

  void checkpoint(int version) {
    for (std::size_t index = 0; index < state.size(); ++index) state[index] = value(version, world_rank(), index);
    store.checkpoint(version);
  }
};

void write(int versions) {
  Job job;
  for (int version = 1; version <= versions; ++version) job.checkpoint(version);
  job.store.wait(resurgo::kAllVersions, resurgo::kL4);
  job.store.close();
}

// `at_least`: a newer version is right too (a kill may come after the job
// completed the version on its way).
void verify(int expected, bool at_least) {
  Job job;
  const int restored = job.store.restart();
  check(restored == expected || (at_least && restored > expected),
        "restored version " + std::to_string(restored) + ", expected " + (at_least ? "at least " : "") +
            std::to_string(expected));
  bool same = true;
  for (std::size_t index = 0; index < job.state.size(); ++index) {
    same = same && job.state[index] == value(restored, world_rank(), index);
  }
  check(same, "the restored bytes are those of version " + std::to_string(restored));
  if (world_rank() == 0) std::printf("restored version %d\n", restored);
  job.store.close();
}

// Version VERSIONS - 1 is complete; RANK dies while VERSIONS is on its way.
void crash(int dying_rank, int versions, int delay_us) {
  Job job;
  for (int version = 1; version < versions; ++version) job.checkpoint(version);
  job.store.wait(resurgo::kAllVersions, resurgo::kL4);
  job.checkpoint(versions);
  if (world_rank() == dying_rank) {
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ::raise(SIGKILL);
  }
  job.store.wait(resurgo::kAllVersions, resurgo::kL4);  // the others wait in vain: mpirun ends the job
}

// checkpoint() returns at once; the job's thread finds the versions differ
// and every rank's next call (here wait) says so.
void different_versions() {
  Job job;
  std::string error;
  job.checkpoint(world_rank() == 1 ? 8 : 7);
  try {
    job.store.wait(resurgo::kAllVersions, resurgo::kL2);
  } catch (const resurgo::InvalidArgumentError& caught) {
    error = caught.what();
  }
  check(error.find("rank 1: 8") != std::string::npos, "the error names the versions: '" + error + "'");
  check(!job.store.latest(), "neither version is a version of the job");
  job.store.close();
}

void missing_rank() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Job job;
  if (world_rank() != size - 1) {
    std::string error;
    try {
      job.checkpoint(1);
      job.store.wait(resurgo::kAllVersions, resurgo::kL2);
    } catch (const resurgo::StateError& caught) {
      error = caught.what();
    }
    const std::string named = "rank(s) " + std::to_string(size - 1) + " did not make the same call";
    check(error.find(named) != std::string::npos || error.find("rank 0 did not answer") != std::string::npos,
          "the error names the missing rank: '" + error + "'");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  job.store.close();
}

// A kRows x kColumns float64 array, element (i, j) = i * 1000 + j, split
// by rows: rank r of n gets a share growing with r.
constexpr std::int64_t kRows = 4099;
constexpr std::int64_t kColumns = 33;

struct RowBlock {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::vector<double> values;

  RowBlock() {
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const auto edge = [&](std::int64_t r) { return kRows * (r * (r + 1) / 2) / (std::int64_t{size} * (size + 1) / 2); };
    first = edge(rank);
    count = edge(rank + 1) - first;
    values.assign(static_cast<std::size_t>(count * kColumns), -1.0);
  }
  double expected(std::int64_t index) const {
    return static_cast<double>((first + index / kColumns) * 1000 + index % kColumns);
  }
  void protect(resurgo::Store& store) {
    store.protect(0, values.data(), values.size() * sizeof(double), "field",
                  resurgo::ElementType{"float64", {count, kColumns}}, resurgo::GlobalBlock{{kRows, kColumns}, {first, 0}});
  }
};

void write_global(int version) {
  resurgo::Store store("mpi-global", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
  RowBlock block;
  block.protect(store);
  for (std::size_t index = 0; index < block.values.size(); ++index) block.values[index] = block.expected(static_cast<std::int64_t>(index));
  store.checkpoint(version);
  store.wait(version, resurgo::kL4);
  store.close();
}

void verify_global(int version) {
  resurgo::Store store("mpi-global", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
  RowBlock block;
  block.protect(store);
  const int restored = store.restart();
  check(restored == version, "restored version " + std::to_string(restored) + ", expected " + std::to_string(version));
  bool same = true;
  for (std::size_t index = 0; index < block.values.size(); ++index) {
    same = same && block.values[index] == block.expected(static_cast<std::int64_t>(index));
  }
  check(same, "the block holds the global array's rows [" + std::to_string(block.first) + ", " +
                  std::to_string(block.first + block.count) + ")");
  store.close();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int first = argc > 2 ? std::atoi(argv[2]) : 0;
  const int second = argc > 3 ? std::atoi(argv[3]) : 0;
  try {
    if (scenario == "write") write(first);
    else if (scenario == "verify") verify(first, false);
    else if (scenario == "verify-at-least") verify(first, true);
    else if (scenario == "crash") crash(first, second, argc > 4 ? std::atoi(argv[4]) : 0);
    else if (scenario == "different-versions") different_versions();
    else if (scenario == "missing-rank") missing_rank();
    else if (scenario == "write-global") write_global(first);
    else if (scenario == "verify-global") verify_global(first);
    else check(false, "unknown scenario '" + scenario + "'");
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return finish();
}
