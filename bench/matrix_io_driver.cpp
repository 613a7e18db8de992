// ConvergentMatrix's global-layout files against the floor of the same
// bytes (bench/matrix_io.py): per repeat, in an order rotated each time,
//   floor write   every rank pwrite()s its local part as one piece of one
//                 file (the same bytes, no layout, no checksum), fsync(),
//   global write  write_global(): darray MPI-IO, checksums, sync, rename,
//   floor read    every rank pread()s its piece back,
//   global read   read_global(): header, darray MPI-IO, checksums,
// each from a barrier to the last rank's end, the reads after the file's
// pages were dropped from the page cache; and for the global steps the
// memory each rank made resident beyond what it held before (the largest
// over the ranks): the kernel's peak is reset first. One JSON line per
// repeat on rank 0.
//
//   mpirun -np P matrix_io_driver --rows N --cols N --block B --order rows|cols --repeats K --dir D
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "resurgo/matrix.hpp"

namespace {

struct Options {
  std::int64_t rows = 8192;
  std::int64_t cols = 8192;
  std::int64_t block = 64;
  std::string order = "rows";
  int repeats = 5;
  std::string dir = "/tmp";
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--rows") options.rows = std::stoll(value);
    if (name == "--cols") options.cols = std::stoll(value);
    if (name == "--block") options.block = std::stoll(value);
    if (name == "--order") options.order = value;
    if (name == "--repeats") options.repeats = std::stoi(value);
    if (name == "--dir") options.dir = value;
  }
  return options;
}

int rank_of() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Seconds from a barrier to the last rank's end of `step`.
double timed(const std::function<void()>& step) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  step();
  double mine = MPI_Wtime() - start;
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"), -1 without it.
double status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024;  // "  1234 kB"
  }
  return -1;
}

// `step` timed, and the most any rank's resident memory grew during it
// above what was resident at its start (bytes; -1 where the kernel cannot
// reset its peak: clear_refs "5" came with Linux 4.0).
struct Measured {
  double seconds = 0;
  double extra_bytes = -1;
};

// Resets the kernel's peak of this process's resident memory (VmHWM).
bool reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5" << std::flush;
  return static_cast<bool>(clear);
}

Measured measured(const std::function<void()>& step) {
  const bool reset = reset_peak();
  const double resident = status_bytes("VmRSS");
  const double seconds = timed(step);
  const double peak = status_bytes("VmHWM");
  const bool known = reset && resident >= 0 && peak >= 0;
  // This rank's growth and whether it could not measure it: one MPI_MAX
  // gives the largest growth and whether any rank could not.
  const double mine[2] = {known ? peak - resident : 0.0, known ? 0.0 : 1.0};
  double over_ranks[2] = {0, 0};
  MPI_Allreduce(mine, over_ranks, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return Measured{seconds, over_ranks[1] > 0 ? -1.0 : over_ranks[0]};
}

// Drops the file's pages from the page cache (rank 0; no root needed).
void evict(const std::string& path) {
  if (rank_of() == 0) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
      ::fsync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

void fail(const std::string& what) {
  std::fprintf(stderr, "matrix_io_driver: %s: %s\n", what.c_str(), std::strerror(errno));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// The floor: this rank's bytes at its offset of one file, then fsync.
void floor_write(const std::string& path, const void* data, std::size_t bytes, std::size_t offset) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
  if (fd < 0) fail("open " + path);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t wrote = ::pwrite(fd, static_cast<const char*>(data) + done, bytes - done, offset + done);
    if (wrote <= 0) fail("pwrite " + path);
    done += static_cast<std::size_t>(wrote);
  }
  if (::fsync(fd) != 0) fail("fsync " + path);
  ::close(fd);
}

void floor_read(const std::string& path, void* data, std::size_t bytes, std::size_t offset) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("open " + path);
  for (std::size_t done = 0; done < bytes;) {
    const ssize_t got = ::pread(fd, static_cast<char*>(data) + done, bytes - done, offset + done);
    if (got <= 0) fail("pread " + path);
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
}

// Both steps, the floor first in even repeats, so that neither always
// finds the other's dirty pages or warm caches.
void in_rotated_order(int repeat, const std::function<void()>& floor, const std::function<void()>& global) {
  if (repeat % 2 == 0) {
    floor();
    global();
  } else {
    global();
    floor();
  }
}

void run(const Options& options) {
  resurgo::ConvergentMatrix<float> matrix(MPI_COMM_WORLD, {options.rows, options.cols, options.block, options.block});
  matrix.commit();
  const std::size_t elements = static_cast<std::size_t>(matrix.local_rows() * matrix.local_cols());
  for (std::size_t i = 0; i < elements; ++i) matrix.local_data()[i] = static_cast<float>(i % 1000) * 0.5f;
  const std::size_t bytes = elements * sizeof(float);
  std::size_t offset = 0;
  MPI_Exscan(&bytes, &offset, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank_of() == 0) offset = 0;
  std::vector<float> back(elements);
  const std::string floor_path = options.dir + "/floor.bin";
  const std::string global_path = options.dir + "/matrix.rsgm";
  const auto order = options.order == "cols" ? resurgo::MatrixOrder::kColumnMajor : resurgo::MatrixOrder::kRowMajor;
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    if (rank_of() == 0) {
      ::unlink(floor_path.c_str());
      ::unlink(global_path.c_str());
    }
    double floor_write_s = 0, floor_read_s = 0;
    Measured write, read;
    const auto floor_writes = [&] {
      floor_write_s = timed([&] { floor_write(floor_path, matrix.local_data(), bytes, offset); });
    };
    const auto global_writes = [&] { write = measured([&] { matrix.write_global(global_path, order); }); };
    in_rotated_order(repeat, floor_writes, global_writes);
    evict(floor_path);
    evict(global_path);
    const auto floor_reads = [&] { floor_read_s = timed([&] { floor_read(floor_path, back.data(), bytes, offset); }); };
    const auto global_reads = [&] { read = measured([&] { matrix.read_global(global_path); }); };
    in_rotated_order(repeat, floor_reads, global_reads);
    if (rank_of() == 0) {
      std::printf(
          "{\"kind\": \"run\", \"repeat\": %d, \"bytes\": %lld, \"floor_write_s\": %.6f, \"write_s\": %.6f, "
          "\"floor_read_s\": %.6f, \"read_s\": %.6f, \"write_extra_bytes\": %.0f, "
          "\"read_extra_bytes\": %.0f}\n",
          repeat, static_cast<long long>(options.rows * options.cols * 4), floor_write_s, write.seconds, floor_read_s,
          read.seconds, write.extra_bytes, read.extra_bytes);
      std::fflush(stdout);
    }
  }
  if (rank_of() == 0) {
    ::unlink(floor_path.c_str());
    ::unlink(global_path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  try {
    run(parse(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "matrix_io_driver: %s\n", error.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return 0;
}
