// The per-element work of ConvergentMatrix's global-layout files
// (bench/matrix_kernels.py) against a memcpy of the same bytes: the part
// checksums (src/matrix/part_checksums.h) and the transposing copies of a
// rank's column-major local array to and from row-major lines
// (src/matrix/local_rows.h), as matrix_io.cpp calls them, a chunk of about
// 2 MiB of whole rows at a time. Every buffer is touched before it is
// timed. One JSON line per repeat:
//
//   matrix_kernels --rows R --cols C --repeats K
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "matrix/local_rows.h"
#include "matrix/part_checksums.h"

namespace {

struct Options {
  std::int64_t rows = 4096;  // one of two ranks' part of an 8192 x 8192 matrix
  std::int64_t cols = 8192;
  int repeats = 5;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const std::string value = argv[i + 1];
    if (name == "--rows") options.rows = std::stoll(value);
    if (name == "--cols") options.cols = std::stoll(value);
    if (name == "--repeats") options.repeats = std::stoi(value);
  }
  return options;
}

template <typename Step>
double seconds(const Step& step) {
  const auto start = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const auto elements = static_cast<std::size_t>(options.rows * options.cols);
  std::vector<float> local(elements);
  for (std::size_t i = 0; i < elements; ++i) local[i] = static_cast<float>(i % 1000) * 0.5f;
  std::vector<float> copy(elements, 1.0f);
  const std::int64_t chunk_rows = std::max<std::int64_t>(1, (std::int64_t{2} << 20) / 4 / options.cols);
  std::vector<float> chunk(static_cast<std::size_t>(chunk_rows * options.cols), 1.0f);
  const resurgo::LocalRows<float> rows{local.data(), options.rows, options.cols};
  std::vector<std::uint64_t> sums((elements * 4 + (1 << 20) - 1) >> 20, 0);
  for (int repeat = 0; repeat < options.repeats; ++repeat) {
    const double memcpy_s = seconds([&] { std::memcpy(copy.data(), local.data(), elements * sizeof(float)); });
    const double sums_s = seconds([&] { resurgo::add_part_sums(local.data(), 0, elements, (1 << 20) / 4, sums); });
    const double rows_out_s = seconds([&] {
      for (std::int64_t first = 0; first < options.rows; first += chunk_rows) {
        rows.copy_out(first, std::min(chunk_rows, options.rows - first), chunk.data());
      }
    });
    const double rows_in_s = seconds([&] {
      for (std::int64_t first = 0; first < options.rows; first += chunk_rows) {
        rows.copy_in(first, std::min(chunk_rows, options.rows - first), chunk.data());
      }
    });
    std::printf("{\"kind\": \"run\", \"repeat\": %d, \"bytes\": %zu, \"memcpy_s\": %.6f, \"part_sums_s\": %.6f, "
                "\"rows_out_s\": %.6f, \"rows_in_s\": %.6f, \"sum0\": %llu}\n",
                repeat, elements * sizeof(float), memcpy_s, sums_s, rows_out_s, rows_in_s,
                static_cast<unsigned long long>(sums[0]));
    std::fflush(stdout);
  }
  return 0;
}
