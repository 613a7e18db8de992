// ConvergentMatrix's global-layout files under mpirun (issue 32 part 3):
// one job writes, others read on other grids, rank counts and block sizes.
// Prints "N passed, M failed" (over all ranks) and exits non-zero on any
// failure.
//
//   matrix_io_check write DIR             (4 ranks, 2 x 2) assemble a 50 x 40 double matrix (8 x 6 blocks) and
//                                          write it row- and column-major; fill a 37 x 29 float one with
//                                          arbitrary bits and write it; checkpoint the double one in store
//                                          "matrix-io" and write a global file with that checkpoint
//   matrix_io_check read DIR PxQ RBxCB    read each file on this grid with these blocks: every element to the
//                                          bit, and the epoch
//   matrix_io_check slabs DIR             (3 ranks) a 1400 x 1060 double matrix of arbitrary bits, 12 parts of
//                                          the file: written in both orders on 3 x 1 (7 x 5 blocks; the rows
//                                          whole: a row-major file from each rank's row blocks, a column-major
//                                          one through a slab per rank), every element at its place in the file,
//                                          read back on 1 x 3 (16 x 9 blocks; the other way round) to the bit;
//                                          a write whose chunks fail part way on one rank (a file size limit):
//                                          refused on every rank, nothing left, written once the limit is lifted
//   matrix_io_check restart-other-grid DIR  the checkpoint of 4 ranks on this job: restart() refuses the
//                                          store's version, read_global() of the file written with it restores
//                                          the matrix and its epoch
//   matrix_io_check refusals DIR          another shape or element type, no file, no global file, a damaged
//                                          header, a truncated file, a damaged part, a grid that is not the
//                                          job's, a write into a missing directory: each refused on every rank
//                                          with the file and what differs named
#include <mpi.h>
#include <sys/resource.h>

#include <bit>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "matrix_elements.h"
#include "mpi_checks.h"
#include "resurgo/matrix.hpp"
#include "resurgo/mpi.hpp"
#include "resurgo/resurgo.hpp"

namespace {

using resurgo::ConvergentMatrix;
using resurgo::MatrixLayout;
using resurgo::MatrixOrder;

using resurgo::mpi_checks::check;
using resurgo::mpi_checks::expect_error;
using resurgo::mpi_checks::for_each_local;
using resurgo::mpi_checks::world_rank;
using resurgo::mpi_checks::world_size;

// ---- the matrices and their values, independent of any grid ----

constexpr std::int64_t kRows = 50;
constexpr std::int64_t kCols = 40;
constexpr std::int64_t kBitsRows = 37;
constexpr std::int64_t kBitsCols = 29;
constexpr int kWriters = 4;
// 11.3 MiB of doubles: 12 parts of the file, a slab of 4 for each of 3 ranks
// (rank 1's from 4 MiB on), and slabs and blocks of lines of several 2 MiB
// chunks.
constexpr std::int64_t kSlabsRows = 1400;
constexpr std::int64_t kSlabsCols = 1060;
// The epochs of the files: the assembly's commit, then each write_global's
// own (the checkpoint's comes between the second and the third).
const std::map<std::string, std::uint64_t> kEpochs{
    {"assembled-rows.rsgm", 2}, {"assembled-cols.rsgm", 3}, {"checkpoint-1.rsgm", 5}};

std::uint64_t hash(std::uint64_t x) {
  x = (x ^ (x >> 33)) * 0xff51afd7ed558ccdULL;
  x = (x ^ (x >> 33)) * 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

// What writer `rank` adds to (row, col): a small integer, so that every sum is exact.
int contribution(int rank, std::int64_t row, std::int64_t col) {
  return static_cast<int>(hash(static_cast<std::uint64_t>((rank * kRows + row) * kCols + col)) % 9) - 4;
}

double assembled(std::int64_t row, std::int64_t col) {
  double sum = 0;
  for (int rank = 0; rank < kWriters; ++rank) sum += contribution(rank, row, col);
  return sum;
}

// Arbitrary finite float bits: every mantissa bit matters.
float arbitrary(std::int64_t row, std::int64_t col) {
  const auto bits = static_cast<std::uint32_t>(hash(static_cast<std::uint64_t>(row * kBitsCols + col) + 7));
  return std::bit_cast<float>((bits & 0x807fffffU) | 0x3f000000U);  // exponent of [0.5, 1)
}

std::string file(const std::string& dir, const char* name) { return dir + "/" + name; }

MatrixLayout parse_layout(std::int64_t rows, std::int64_t cols, const std::string& grid, const std::string& blocks) {
  const auto first = [](const std::string& text) { return std::stoll(text); };
  const auto second = [](const std::string& text) { return std::stoll(text.substr(text.find('x') + 1)); };
  return {rows, cols, first(blocks), second(blocks), static_cast<int>(first(grid)), static_cast<int>(second(grid))};
}

// Whether every element of the matrix, over all ranks, is expected(row,
// col) to the bit; the first difference is reported.
template <typename T>
void check_every_element(ConvergentMatrix<T>& matrix, const std::function<T(std::int64_t, std::int64_t)>& expected,
                         const std::string& what) {
  long compared = 0;
  std::string difference;
  for_each_local<T>(matrix, [&](std::int64_t row, std::int64_t col, T& held) {
    ++compared;
    const T wanted = expected(row, col);
    if (difference.empty() && std::memcmp(&held, &wanted, sizeof(T)) != 0) {
      difference = "A(" + std::to_string(row) + ", " + std::to_string(col) + ") = " + std::to_string(held) +
                   ", expected " + std::to_string(wanted);
    }
  });
  long total = 0;
  MPI_Allreduce(&compared, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const MatrixLayout& layout = matrix.layout();
  check(difference.empty(), what + ": every element to the bit: " + difference);
  check(total == layout.rows * layout.cols, what + ": every element compared once");
}

template <typename T>
void fill_with(ConvergentMatrix<T>& matrix, T value) {
  for_each_local<T>(matrix, [&](std::int64_t, std::int64_t, T& held) { held = value; });
}

// ---- write ----

// Every writer adds its contributions in row panels of 7 rows, all columns.
void assemble(ConvergentMatrix<double>& matrix) {
  std::vector<std::int64_t> cols(kCols);
  for (std::int64_t col = 0; col < kCols; ++col) cols[static_cast<std::size_t>(col)] = col;
  for (std::int64_t first = 0; first < kRows; first += 7) {
    std::vector<std::int64_t> rows;
    std::vector<double> values;
    for (std::int64_t row = first; row < std::min(kRows, first + 7); ++row) {
      rows.push_back(row);
      for (const std::int64_t col : cols) values.push_back(contribution(world_rank(), row, col));
    }
    matrix.update(values, rows, cols);
  }
  matrix.commit();
}

// Whether `data`, a rows x cols matrix in `order`, is expected(row, col)
// everywhere, to the bit.
template <typename T>
bool in_global_order(const std::vector<T>& data, MatrixOrder order, std::int64_t rows, std::int64_t cols,
                     const std::function<T(std::int64_t, std::int64_t)>& expected) {
  bool placed = true;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t col = 0; col < cols; ++col) {
      const std::int64_t index = order == MatrixOrder::kRowMajor ? row * cols + col : col * rows + row;
      const T wanted = expected(row, col);
      placed = placed && std::memcmp(&data[static_cast<std::size_t>(index)], &wanted, sizeof(T)) == 0;
    }
  }
  return placed;
}

// Rank 0 reads the file as a program without the library would: the data
// offset from the header (bytes 64-71), then every element at its place in
// the global order.
template <typename T>
void check_raw_layout(const std::string& path, MatrixOrder order, std::int64_t rows, std::int64_t cols,
                      const std::function<T(std::int64_t, std::int64_t)>& expected) {
  if (world_rank() != 0) return;
  std::ifstream in(path, std::ios::binary);
  std::uint64_t offset = 0;
  in.seekg(64);
  in.read(reinterpret_cast<char*>(&offset), sizeof(offset));
  std::vector<T> data(static_cast<std::size_t>(rows * cols));
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
  check(in && in_global_order(data, order, rows, cols, expected),
        path + ": every element at its place in the global order");
}

// Rank 0 reads the file alone, without MPI (read_global_file): its header
// and every element at its place in the global order.
template <typename T>
void check_read_alone(const std::string& path, MatrixOrder order, std::int64_t rows, std::int64_t cols,
                      std::uint64_t epoch, const std::function<T(std::int64_t, std::int64_t)>& expected) {
  if (world_rank() != 0) return;
  const resurgo::GlobalFileHeader header = resurgo::read_global_file_header(path);
  check(header.rows == rows && header.cols == cols && header.element_bytes == sizeof(T) && header.order == order &&
            header.epoch == epoch,
        path + ": read_global_file_header gives the shape, element size, order and epoch");
  std::vector<T> data(static_cast<std::size_t>(rows * cols));
  resurgo::read_global_file(path, data.data(), data.size() * sizeof(T));
  check(in_global_order(data, order, rows, cols, expected),
        path + ": read_global_file puts every element at its place in the global order");
}

void write(const std::string& dir) {
  check(world_size() == kWriters, "the write mode runs on 4 ranks");
  if (world_size() != kWriters) return;
  std::filesystem::create_directories(dir);
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kRows, kCols, 8, 6, 2, 2});
  assemble(matrix);
  matrix.write_global(file(dir, "assembled-rows.rsgm"), MatrixOrder::kRowMajor);
  matrix.write_global(file(dir, "assembled-cols.rsgm"));  // the default order
  check(matrix.stats().commits == kEpochs.at("assembled-cols.rsgm"), "write_global commits first");
  check_every_element<double>(matrix, assembled, "the written matrix is unchanged");
  check_raw_layout<double>(file(dir, "assembled-rows.rsgm"), MatrixOrder::kRowMajor, kRows, kCols, assembled);
  check_raw_layout<double>(file(dir, "assembled-cols.rsgm"), MatrixOrder::kColumnMajor, kRows, kCols, assembled);
  check_read_alone<double>(file(dir, "assembled-rows.rsgm"), MatrixOrder::kRowMajor, kRows, kCols,
                           kEpochs.at("assembled-rows.rsgm"), assembled);
  check_read_alone<double>(file(dir, "assembled-cols.rsgm"), MatrixOrder::kColumnMajor, kRows, kCols,
                           kEpochs.at("assembled-cols.rsgm"), assembled);

  ConvergentMatrix<float> bits(MPI_COMM_WORLD, {kBitsRows, kBitsCols, 4, 3, 2, 2});
  bits.commit();
  for_each_local<float>(bits, [](std::int64_t row, std::int64_t col, float& held) { held = arbitrary(row, col); });
  bits.write_global(file(dir, "bits.rsgm"), MatrixOrder::kRowMajor);

  // A checkpoint, and the global file written with it.
  resurgo::Store store("matrix-io", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
  matrix.protect(store, 0);
  matrix.checkpoint(store, 1);
  matrix.write_global(file(dir, "checkpoint-1.rsgm"));
  store.wait(resurgo::kAllVersions, resurgo::kL4);
  store.close();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    bool partial = false;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      partial = partial || entry.path().filename().string().find(".partial-") != std::string::npos;
    }
    check(!partial, "no temporary file is left behind");
    check((std::filesystem::status(file(dir, "bits.rsgm")).permissions() & std::filesystem::perms::all) ==
              (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write),
          "the file has mode 0600");
  }
}

// ---- read ----

void read(const std::string& dir, const std::string& grid, const std::string& blocks) {
  const std::string where = " on " + grid + " with blocks " + blocks;
  for (const char* name : {"assembled-rows.rsgm", "assembled-cols.rsgm"}) {
    ConvergentMatrix<double> matrix(MPI_COMM_WORLD, parse_layout(kRows, kCols, grid, blocks));
    fill_with(matrix, 99.0);
    matrix.read_global(file(dir, name));
    check_every_element<double>(matrix, assembled, std::string(name) + where);
    check(matrix.stats().commits == kEpochs.at(name), std::string(name) + where + ": the epoch is the file's");
    // Updates after a read add to what was read.
    const std::vector<double> one{1};
    const std::vector<std::int64_t> at{3};
    if (world_rank() == 0) matrix.update(one, at, at);
    matrix.commit();
    if (matrix.owns(3, 3)) check(matrix.at(3, 3) == assembled(3, 3) + 1, std::string(name) + where + ": updates go on");
  }
  ConvergentMatrix<float> bits(MPI_COMM_WORLD, parse_layout(kBitsRows, kBitsCols, grid, blocks));
  bits.read_global(file(dir, "bits.rsgm"));
  check_every_element<float>(bits, arbitrary, "bits.rsgm" + where);
}

// ---- files of several slabs ----

// Arbitrary finite double bits for the matrix of several slabs.
double wide(std::int64_t row, std::int64_t col) {
  const std::uint64_t bits = hash(static_cast<std::uint64_t>(row * kSlabsCols + col) + 11);
  return std::bit_cast<double>((bits & 0x800fffffffffffffULL) | 0x3fe0000000000000ULL);  // exponent of [0.5, 1)
}

// While alive, on the ranks that ask: this process may make no file longer
// than `bytes` (RLIMIT_FSIZE), and SIGXFSZ is ignored, so that a write
// past the limit fails with EFBIG instead of ending the process.
class FileSizeLimit {
 public:
  FileSizeLimit(bool here, rlim_t bytes) : here_(here) {
    if (!here_) return;
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    if (!here_) return;
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  bool here_;
  rlimit saved_{};
  void (*previous_)(int) = SIG_DFL;
};

// A write that fails part way on one rank: rank 1 may not make the file
// longer than 3 MiB past the start of its slab (the file's data from 4 MiB
// on: 12 parts of 1 MiB dealt to 3 ranks), so its second chunk fails while
// the exchange with the owners goes on. (Open MPI passes the short write
// on as a success and the next call's EFBIG as a success moving nothing.)
// Every rank gets the error, naming the file and the call; neither the file nor a partial one is left; the
// matrix writes the file once the limit is lifted. Both orders through
// slabs: row-major on 1 x 3 (the owners' rings), column-major on 3 x 1.
void write_fails_part_way(const std::string& dir) {
  struct Case {
    MatrixOrder order;
    int grid_rows, grid_cols;
    const char* name;
  };
  for (const Case& c : {Case{MatrixOrder::kRowMajor, 1, 3, "part-way-rows.rsgm"},
                        Case{MatrixOrder::kColumnMajor, 3, 1, "part-way-cols.rsgm"}}) {
    ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kSlabsRows, kSlabsCols, 16, 9, c.grid_rows, c.grid_cols});
    matrix.commit();
    for_each_local<double>(matrix, [](std::int64_t row, std::int64_t col, double& held) { held = wide(row, col); });
    const std::string name = file(dir, c.name);
    {
      const FileSizeLimit limit(world_rank() == 1, (std::uint64_t{7} << 20) + 4096);
      expect_error<resurgo::StorageError>(
          [&] { matrix.write_global(name, c.order); },
          {"ConvergentMatrix::write_global: file '" + name + "'", "MPI_File_write_at moved none of", "has room"},
          name + ": a chunk's write fails on rank 1");
    }
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0 removes the partial file after the others returned
    bool left = std::filesystem::exists(name);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      left = left || entry.path().filename().string().rfind(std::string(c.name) + ".partial-", 0) == 0;
    }
    check(!left, name + ": neither the file nor a partial one is left after the failed write");
    matrix.write_global(name, c.order);
    check_raw_layout<double>(name, c.order, kSlabsRows, kSlabsCols, wide);
  }
}

void slabs(const std::string& dir) {
  check(world_size() == 3, "the slabs mode runs on 3 ranks");
  if (world_size() != 3) return;
  std::filesystem::create_directories(dir);
  // Row blocks of 7 and of 300 rows: a row-major file is then written from
  // blocks of lines of one chunk and of several (the grid splits no row);
  // a column-major one from slabs of several chunks.
  for (const std::int64_t row_block : {7, 300}) {
    for (const MatrixOrder order : {MatrixOrder::kRowMajor, MatrixOrder::kColumnMajor}) {
      const std::string name = file(dir, order == MatrixOrder::kRowMajor ? "slabs-rows.rsgm" : "slabs-cols.rsgm");
      ConvergentMatrix<double> written(MPI_COMM_WORLD, {kSlabsRows, kSlabsCols, row_block, 5, 3, 1});
      written.commit();
      for_each_local<double>(written, [](std::int64_t row, std::int64_t col, double& held) { held = wide(row, col); });
      written.write_global(name, order);
      check_raw_layout<double>(name, order, kSlabsRows, kSlabsCols, wide);
      ConvergentMatrix<double> read(MPI_COMM_WORLD, {kSlabsRows, kSlabsCols, 16, 9, 1, 3});
      read.read_global(name);
      check_every_element<double>(read, wide, name + " read on 1 x 3 with blocks 16 x 9");
      ConvergentMatrix<double> again(MPI_COMM_WORLD, {kSlabsRows, kSlabsCols, row_block, 5, 3, 1});
      again.read_global(name);
      check_every_element<double>(again, wide, name + " read on the grid that wrote it");
    }
  }
  write_fails_part_way(dir);
}

// ---- restart on another grid ----

void restart_other_grid(const std::string& dir) {
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kRows, kCols, 8, 6, 0, 0});
  resurgo::Store store("matrix-io", resurgo::Config::load(), resurgo::mpi_comm(MPI_COMM_WORLD));
  matrix.protect(store, 0);
  expect_error<resurgo::StateError>([&] { matrix.restart(store); }, {"written by 4 ranks", "read_global()"},
                                    "restart() of a version of 4 ranks on " + std::to_string(world_size()));
  matrix.read_global(file(dir, "checkpoint-1.rsgm"));
  check_every_element<double>(matrix, assembled, "the checkpoint's global file on another grid");
  check(matrix.stats().commits == kEpochs.at("checkpoint-1.rsgm"), "the checkpoint's epoch is restored");
  store.close();
}

// ---- refusals ----

// Rank 0 copies `from` to `to` and changes it with `damage` (the bytes);
// every rank waits for it.
void damaged_copy(const std::string& from, const std::string& to,
                  const std::function<void(std::vector<char>&)>& damage) {
  if (world_rank() == 0) {
    std::ifstream in(from, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    damage(bytes);
    std::filesystem::remove(to);
    std::ofstream(to, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// A refused read leaves the matrix as it was: nothing was read.
template <typename Error>
void refused_before_reading(const MatrixLayout& layout, const std::string& path,
                            const std::vector<std::string>& needles, const std::string& what) {
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, layout);
  fill_with(matrix, 7.0);
  expect_error<Error>([&] { matrix.read_global(path); }, needles, what);
  check_every_element<double>(
      matrix, [](std::int64_t, std::int64_t) { return 7.0; }, what + ": nothing was read");
}

void refuse_headers(const std::string& dir) {
  const std::string rows = file(dir, "assembled-rows.rsgm");
  const MatrixLayout layout{kRows, kCols, 5, 5, 0, 0};
  refused_before_reading<resurgo::MismatchError>({kRows, kCols + 1, 5, 5, 0, 0}, rows,
                                                 {rows, "holds a matrix of 50 x 40, this matrix has 50 x 41"},
                                                 "another shape");
  ConvergentMatrix<float> single(MPI_COMM_WORLD, {kRows, kCols, 5, 5, 0, 0});
  expect_error<resurgo::MismatchError>([&] { single.read_global(rows); },
                                       {rows, "holds elements of float64, this matrix has float32"},
                                       "another element type");
  refused_before_reading<resurgo::NotFoundError>(layout, file(dir, "none.rsgm"), {"none.rsgm"}, "no file");
  const std::string text = file(dir, "refusal-text.rsgm");
  damaged_copy(rows, text, [](std::vector<char>& bytes) { bytes.assign(100, 'x'); });
  refused_before_reading<resurgo::FormatError>(layout, text, {text, "no ConvergentMatrix global-layout file"},
                                               "no global-layout file");
  const std::string header = file(dir, "refusal-header.rsgm");
  damaged_copy(rows, header, [](std::vector<char>& bytes) { bytes[30] ^= 1; });
  refused_before_reading<resurgo::CorruptionError>(layout, header, {header, "header does not match its checksum"},
                                                   "a damaged header");
  const std::string table = file(dir, "refusal-table.rsgm");
  damaged_copy(rows, table, [](std::vector<char>& bytes) { bytes[90] ^= 1; });
  refused_before_reading<resurgo::CorruptionError>(layout, table, {table, "table of part checksums"},
                                                   "a damaged checksum table");
  const std::string truncated = file(dir, "refusal-truncated.rsgm");
  damaged_copy(rows, truncated, [](std::vector<char>& bytes) { bytes.resize(bytes.size() - 8); });
  refused_before_reading<resurgo::CorruptionError>(
      layout, truncated, {truncated, "is 20088 bytes long; its header says 20096"}, "a truncated file");
}

// One flipped bit in the last element: the part is named, the matrix zeroed
// (and read alone, the same part named).
void refuse_damaged_part(const std::string& dir) {
  const std::string damaged = file(dir, "refusal-part.rsgm");
  damaged_copy(file(dir, "assembled-cols.rsgm"), damaged, [](std::vector<char>& bytes) { bytes.back() ^= 0x10; });
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kRows, kCols, 5, 5, 0, 0});
  expect_error<resurgo::CorruptionError>([&] { matrix.read_global(damaged); },
                                         {damaged, "is damaged: part 0 of 1 (file bytes 4096 to 20096)"},
                                         "a damaged element");
  check_every_element<double>(
      matrix, [](std::int64_t, std::int64_t) { return 0.0; }, "a damaged file is not kept");
  if (world_rank() == 0) {  // read alone, the same damage is named; a buffer of another size is refused first
    std::vector<double> alone(static_cast<std::size_t>(kRows * kCols));
    expect_error<resurgo::CorruptionError>(
        [&] { resurgo::read_global_file(damaged, alone.data(), alone.size() * sizeof(double)); },
        {"read_global_file: file '" + damaged + "'", "part 0 of 1"}, "a damaged element, read alone");
    expect_error<resurgo::InvalidArgumentError>([&] { resurgo::read_global_file(damaged, alone.data(), 8); },
                                                {damaged, "16000 bytes", "not 8"}, "a buffer of another size");
    const std::string text = file(dir, "refusal-text.rsgm");
    expect_error<resurgo::FormatError>([&] { resurgo::read_global_file_header(text); },
                                       {text, "no ConvergentMatrix global-layout file"}, "no global file, read alone");
  }
  // A 2 MiB float64 matrix has two parts: damage in the second names it.
  ConvergentMatrix<double> large(MPI_COMM_WORLD, {512, 512, 32, 32, 0, 0});
  large.write_global(file(dir, "large.rsgm"));
  const std::string second = file(dir, "refusal-second-part.rsgm");
  damaged_copy(file(dir, "large.rsgm"), second, [](std::vector<char>& bytes) { bytes[4096 + (1 << 20) + 5] ^= 1; });
  expect_error<resurgo::CorruptionError>([&] { large.read_global(second); }, {second, "part 1 of 2"},
                                         "damage in the second part");
}

void refuse_layouts_and_writes(const std::string& dir) {
  expect_error<resurgo::InvalidArgumentError>(
      [&] {
        ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kRows, kCols, 8, 6, world_size(), 2});
        matrix.read_global(file(dir, "assembled-rows.rsgm"));
      },
      {"a grid of " + std::to_string(world_size()) + " x 2"}, "a grid that is not the job's, before any read");
  ConvergentMatrix<double> matrix(MPI_COMM_WORLD, {kRows, kCols, 8, 6, 0, 0});
  const std::string missing = file(dir, "no-directory/matrix.rsgm");
  expect_error<resurgo::StorageError>([&] { matrix.write_global(missing); },
                                      {"ConvergentMatrix::write_global: file '" + missing + "'", "directory exists"},
                                      "a write into a missing directory");
}

void refusals(const std::string& dir) {
  refuse_headers(dir);
  refuse_damaged_part(dir);
  refuse_layouts_and_writes(dir);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const std::map<std::string, std::function<void()>> modes{
        {"write", [&] { write(args.at(1)); }},
        {"read", [&] { read(args.at(1), args.at(2), args.at(3)); }},
        {"restart-other-grid", [&] { restart_other_grid(args.at(1)); }},
        {"slabs", [&] { slabs(args.at(1)); }},
        {"refusals", [&] { refusals(args.at(1)); }},
    };
    const auto found = args.empty() ? modes.end() : modes.find(args[0]);
    if (found == modes.end()) {
      check(false, "unknown mode");
    } else {
      found->second();
    }
  } catch (const std::exception& error) {
    check(false, std::string("unexpected error: ") + error.what());
  }
  return resurgo::mpi_checks::finish_counted("matrix_io_check", args.empty() ? "" : args[0]);
}
