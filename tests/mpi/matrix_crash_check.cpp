// ConvergentMatrix::write_global killed part way (issue 32 part 3; the
// crash campaign of docs/reliability.md for global-layout files): a rank
// dies (SIGKILL) while the job rewrites a file that holds an older matrix,
// and the file must then hold the old matrix or the new one whole, never
// a mix or a damaged file (the write goes to a temporary renamed once every
// rank's bytes are synced). matrix_crash.cmake drives the modes.
//
//   matrix_crash_check base DIR ORDER            (3 ranks) write generation 1 to DIR/crash-ORDER.rsgm;
//                                                 prints the write's milliseconds
//   matrix_crash_check crash DIR ORDER GEN RANK DELAY_US
//                                                 (3 ranks) rewrite it with generation GEN; RANK dies
//                                                 DELAY_US after the write starts (or at its end)
//   matrix_crash_check after DIR ORDER OLD NEW   (1 rank) the file verifies and holds generation OLD or
//                                                 NEW whole; prints "holds generation N" and the number
//                                                 of temporaries left
//
// ORDER is rows or cols: a row-major file on a 1 x 3 grid and a
// column-major one on 3 x 1, both written through slabs (the row-major one
// through the owners' transposing rings).
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "matrix_elements.h"
#include "mpi_checks.h"
#include "resurgo/global_file.hpp"
#include "resurgo/matrix.hpp"

namespace {

using resurgo::ConvergentMatrix;
using resurgo::MatrixLayout;
using resurgo::MatrixOrder;
using resurgo::mpi_checks::check;
using resurgo::mpi_checks::for_each_local;
using resurgo::mpi_checks::world_rank;

// 11.3 MiB of doubles: 12 parts, a slab of 4 for each of 3 ranks.
constexpr std::int64_t kRows = 1400;
constexpr std::int64_t kCols = 1060;

// Generation g's element (row, col): exact in a double, and no two
// generations share a value.
double value(std::uint64_t generation, std::int64_t row, std::int64_t col) {
  return static_cast<double>((generation << 24) + static_cast<std::uint64_t>(row * kCols + col));
}

MatrixOrder order_named(const std::string& name) {
  return name == "rows" ? MatrixOrder::kRowMajor : MatrixOrder::kColumnMajor;
}

std::string path_of(const std::string& dir, const std::string& order) { return dir + "/crash-" + order + ".rsgm"; }

// A 3-rank matrix holding generation `generation`, on the grid that makes
// `order`'s file go through slabs.
void write_generation(const std::string& dir, const std::string& order, std::uint64_t generation,
                      const std::function<void()>& started) {
  const MatrixLayout layout =
      order == "rows" ? MatrixLayout{kRows, kCols, 7, 5, 1, 3} : MatrixLayout{kRows, kCols, 7, 5, 3, 1};
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout);
  matrix.commit();
  for_each_local<double>(matrix,
                         [&](std::int64_t row, std::int64_t col, double& held) { held = value(generation, row, col); });
  MPI_Barrier(MPI_COMM_WORLD);
  started();
  matrix.write_global(path_of(dir, order), order_named(order));
}

void base(const std::string& dir, const std::string& order) {
  std::filesystem::create_directories(dir);
  auto start = std::chrono::steady_clock::now();
  write_generation(dir, order, 1, [&] { start = std::chrono::steady_clock::now(); });
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (world_rank() == 0) std::printf("write_global took %.1f ms\n", ms);
}

void crash(const std::string& dir, const std::string& order, std::uint64_t generation, int dying_rank, int delay_us) {
  std::thread killer;
  write_generation(dir, order, generation, [&] {
    if (world_rank() != dying_rank) return;
    killer = std::thread([delay_us] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
      ::raise(SIGKILL);
    });
  });
  if (killer.joinable()) killer.join();  // the dying rank dies here if the write ended first
  MPI_Barrier(MPI_COMM_WORLD);           // the others wait for it in vain: mpirun ends the job
}

void after(const std::string& dir, const std::string& order, std::uint64_t old_generation,
           std::uint64_t new_generation) {
  const std::string path = path_of(dir, order);
  const resurgo::GlobalFileHeader header = resurgo::verify_global_file(path);
  check(header.rows == kRows && header.cols == kCols && header.order == order_named(order),
        path + ": the header is the matrix's");
  std::vector<double> elements(static_cast<std::size_t>(kRows * kCols));
  resurgo::read_global_file(path, elements.data(), elements.size() * sizeof(double));
  std::uint64_t old_elements = 0;  // elements holding generation OLD's value, and NEW's
  std::uint64_t new_elements = 0;
  for (std::int64_t row = 0; row < kRows; ++row) {
    for (std::int64_t col = 0; col < kCols; ++col) {
      const std::int64_t index = order_named(order) == MatrixOrder::kRowMajor ? row * kCols + col : col * kRows + row;
      const double held = elements[static_cast<std::size_t>(index)];
      old_elements += held == value(old_generation, row, col) ? 1 : 0;
      new_elements += held == value(new_generation, row, col) ? 1 : 0;
    }
  }
  const auto whole = static_cast<std::uint64_t>(kRows * kCols);
  const bool holds_new = new_elements == whole;
  check(old_elements == whole || holds_new,
        path + ": holds generation " + std::to_string(old_generation) + " or " + std::to_string(new_generation) +
            " whole (elements of each: " + std::to_string(old_elements) + ", " + std::to_string(new_elements) + ")");
  int temporaries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    temporaries += entry.path().filename().string().rfind("crash-" + order + ".rsgm.partial-", 0) == 0 ? 1 : 0;
  }
  std::printf("holds generation %llu; %d temporaries left\n",
              static_cast<unsigned long long>(holds_new ? new_generation : old_generation), temporaries);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const std::string mode = args.at(0);
    if (mode == "base") {
      base(args.at(1), args.at(2));
    } else if (mode == "crash") {
      crash(args.at(1), args.at(2), std::stoull(args.at(3)), std::stoi(args.at(4)), std::stoi(args.at(5)));
    } else if (mode == "after") {
      after(args.at(1), args.at(2), std::stoull(args.at(3)), std::stoull(args.at(4)));
    } else {
      check(false, "unknown mode " + mode);
    }
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return resurgo::mpi_checks::finish_counted("matrix_crash_check", args.empty() ? "" : args[0]);
}
