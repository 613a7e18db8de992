// A job that goes on after a rank's death, and latest() against restart()
// on another rank count, under mpirun (issue 28, items 2 and 8).
// tests/mpi/CMakeLists.txt runs the scenarios in order; the directories
// come from the environment as for mpi_store_check. Exits 0 when every
// check held on every rank.
//
//   job_restart_check die RANK       versions 1..12 complete; the other ranks write 13 and 14,
//                                    which the job cannot commit, then RANK dies (SIGKILL)
//   job_restart_check continue       latest() and restart() give 12 on every rank; the job
//                                    checkpoints 13 and 14 and restarts 14
//   job_restart_check write-split V  checkpoint V of a global array split evenly by rank
//   job_restart_check latest-split V latest() and restart() give V on this job's rank count
//   job_restart_check latest-local V with a region of each rank alone too: latest() and
//                                    restart() fail on every rank, saying why
#include <mpi.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mpi_checks.h"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

using namespace resurgo::mpi_checks;

resurgo::Store open_store(const char* name) {
  return resurgo::Store(name, resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
}

// ------------------------------------------------------------ a rank dies

int value(int version, int rank) { return version * 1000 + rank; }

bool holds_at_l2(resurgo::Store& store, int version) {
  for (const resurgo::VersionInfo& info : store.versions()) {
    if (info.version == version && std::count(info.levels.begin(), info.levels.end(), resurgo::kL2) > 0) return true;
  }
  return false;
}

// The dying rank never checkpoints 13: the job cannot commit 13 or 14, of
// which the others leave files behind (no job manifest).
void die(int dying_rank) {
  resurgo::Store store = open_store("death");
  std::vector<int> state(4096);
  store.protect(0, state.data(), state.size() * sizeof(int), "state");
  for (int version = 1; version <= 12; ++version) {
    std::fill(state.begin(), state.end(), value(version, world_rank()));
    store.checkpoint(version);
  }
  store.wait(resurgo::kAllVersions, resurgo::kL4);
  if (world_rank() != dying_rank) {
    for (int version : {13, 14}) {
      std::fill(state.begin(), state.end(), value(version, world_rank()));
      store.checkpoint(version);
    }
    while (!holds_at_l2(store, 13) || !holds_at_l2(store, 14)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == dying_rank) ::raise(SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(50));  // mpirun ends the job
}

void go_on() {
  resurgo::Store store = open_store("death");
  std::vector<int> state(4096, -1);
  store.protect(0, state.data(), state.size() * sizeof(int), "state");
  const std::optional<int> latest = store.latest();
  check(latest == 12, "latest() is " + (latest ? std::to_string(*latest) : std::string("none")) + ", not 12");
  const int restored = store.restart();
  check(restored == 12, "restart() restored " + std::to_string(restored) + ", not 12");
  for (int version : {13, 14}) {
    std::fill(state.begin(), state.end(), value(version, world_rank()));
    store.checkpoint(version);
  }
  store.wait(resurgo::kAllVersions, resurgo::kL4);
  std::fill(state.begin(), state.end(), -1);
  check(store.restart() == 14, "the job's own version 14 is restored");
  check(state == std::vector<int>(state.size(), value(14, world_rank())), "version 14's bytes are restored");
  store.close();
}

// ------------------------------------------- another number of ranks

constexpr std::int64_t kElements = 4800;  // divisible by 1, 2, 3, 4, 6

struct Block {
  std::vector<double> values = std::vector<double>(static_cast<std::size_t>(kElements / world_size()), -1);
  std::int64_t first = world_rank() * (kElements / world_size());

  void fill() {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(first) + static_cast<double>(i);
  }
  bool filled() const {
    Block expected;
    expected.fill();
    return values == expected.values;
  }
  void protect(resurgo::Store& store) {
    store.protect(0, values.data(), values.size() * sizeof(double), "field",
                  resurgo::ElementType{"float64", {static_cast<std::int64_t>(values.size())}},
                  resurgo::GlobalBlock{{kElements}, {first}});
  }
};

void write_split(int version) {
  resurgo::Store store = open_store("split");
  Block block;
  block.fill();
  block.protect(store);
  store.checkpoint(version);
  store.wait(version, resurgo::kL4);
  store.close();
}

void latest_split(int version) {
  resurgo::Store store = open_store("split");
  Block block;
  block.protect(store);
  const std::optional<int> latest = store.latest();
  check(latest == version, "latest() is " + (latest ? std::to_string(*latest) : std::string("none")) + ", not " +
                               std::to_string(version));
  check(store.restart() == version, "restart() restores version " + std::to_string(version));
  check(block.filled(), "the block holds its elements of the global array");
  store.close();
}

// A region of each rank alone cannot be redistributed: latest() says so,
// as restart() does, instead of answering none.
void latest_local(int version) {
  resurgo::Store store = open_store("split");
  Block block;
  block.protect(store);
  int step = 0;
  store.protect(1, &step, sizeof step, "step");
  const std::string why = "version " + std::to_string(version) + " (written by ";
  std::string latest_error;
  std::string restart_error;
  try {
    store.latest();
  } catch (const resurgo::StateError& error) {
    latest_error = error.what();
  }
  try {
    store.restart();
  } catch (const resurgo::NotFoundError& error) {
    restart_error = error.what();
  }
  check(latest_error.find(why) != std::string::npos && latest_error.find("'step'") != std::string::npos,
        "latest() says why: '" + latest_error + "'");
  check(restart_error.find(why) != std::string::npos, "restart() says why: '" + restart_error + "'");
  store.close();
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int argument = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    if (scenario == "die") die(argument);
    else if (scenario == "continue") go_on();
    else if (scenario == "write-split") write_split(argument);
    else if (scenario == "latest-split") latest_split(argument);
    else if (scenario == "latest-local") latest_local(argument);
    else check(false, "unknown scenario '" + scenario + "'");
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return finish();
}
