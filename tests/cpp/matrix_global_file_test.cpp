// A global-layout file read or verified by one process without MPI
// (resurgo::read_global_file, verify_global_file,
// src/matrix/global_file_reader.cpp): files made
// here byte by byte, as write_global lays them out, read back whole; damage,
// truncation and hostile headers (valid checksums over impossible shapes)
// refused by name before anything is sized from them. The MPI jobs of
// tests/mpi/matrix_io_check.cpp read files write_global wrote. The reader
// is in every build, with MPI or without (include/resurgo/global_file.hpp).

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error_text.h"
#include "matrix/global_file.h"
#include "matrix/part_checksums.h"
#include "resurgo/errors.hpp"
#include "resurgo/global_file.hpp"
#include "test_util.h"

namespace resurgo {
namespace {

// The bytes of a file of `header`'s shape holding `elements`, as
// write_global lays it out: head, table, padding, elements.
std::vector<std::byte> file_bytes(GlobalHeader header, const std::vector<double>& elements) {
  header.parts = header.parts_expected();
  header.data_offset = header.data_offset_expected();
  std::vector<std::uint64_t> table(header.parts, 0);
  add_part_sums(elements.data(), 0, elements.size(), header.part_bytes / sizeof(double), table);
  std::vector<std::byte> bytes = encode_global_file_head(header, table);
  bytes.resize(header.data_offset, std::byte{0});
  const auto* data = reinterpret_cast<const std::byte*>(elements.data());
  bytes.insert(bytes.end(), data, data + elements.size() * sizeof(double));
  return bytes;
}

GlobalHeader header_of(std::int64_t rows, std::int64_t cols, MatrixOrder order) {
  GlobalHeader header;
  header.element_bytes = sizeof(double);
  header.order = order;
  header.rows = rows;
  header.cols = cols;
  header.epoch = 7;
  return header;
}

std::string write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// The message of the `Error` that `call` throws; a failure when it throws none.
template <typename Error, typename Call>
std::string message_of(const Call& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error was thrown";
  return "";
}

class GlobalFileReadAlone : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
};

// 300 x 500 float64: 1.14 MiB, two parts.
TEST_F(GlobalFileReadAlone, ReadsEveryElementAndTheHeader) {
  std::vector<double> elements(300 * 500);
  for (std::size_t i = 0; i < elements.size(); ++i) elements[i] = static_cast<double>(i) * 0.5 - 3;
  const std::string file =
      write_file(path("m.rsgm"), file_bytes(header_of(300, 500, MatrixOrder::kRowMajor), elements));
  const GlobalFileHeader header = read_global_file_header(file);
  EXPECT_EQ(header.rows, 300);
  EXPECT_EQ(header.cols, 500);
  EXPECT_EQ(header.element_bytes, 8u);
  EXPECT_EQ(header.order, MatrixOrder::kRowMajor);
  EXPECT_EQ(header.epoch, 7u);
  std::vector<double> read(elements.size(), -1);
  read_global_file(file, read.data(), read.size() * sizeof(double));
  EXPECT_EQ(read, elements);
}

TEST_F(GlobalFileReadAlone, NamesTheDamagedPartATruncatedFileAndABufferOfAnotherSize) {
  const std::vector<double> elements(300 * 500, 1.25);
  std::vector<std::byte> bytes = file_bytes(header_of(300, 500, MatrixOrder::kColumnMajor), elements);
  bytes[bytes.size() - 3] ^= std::byte{0x01};  // in the second part
  const std::string damaged = write_file(path("damaged.rsgm"), bytes);
  std::vector<double> read(elements.size());
  EXPECT_CONTAINS(
      message_of<CorruptionError>([&] { read_global_file(damaged, read.data(), read.size() * sizeof(double)); }),
      "part 1 of 2");
  EXPECT_CONTAINS(message_of<InvalidArgumentError>([&] { read_global_file(damaged, read.data(), 16); }), "not 16");
  bytes.resize(bytes.size() - 8);
  const std::string truncated = write_file(path("truncated.rsgm"), bytes);
  EXPECT_CONTAINS(message_of<CorruptionError>([&] { read_global_file_header(truncated); }), "truncated or extended");
  EXPECT_CONTAINS(message_of<NotFoundError>([&] { read_global_file_header(path("none.rsgm")); }), "none.rsgm");
}

// 1100 x 1000 float64: 8.4 MiB, nine parts, verified in two pieces of the
// 8 MiB the verification holds.
TEST_F(GlobalFileReadAlone, VerifyChecksEveryPartWithoutKeepingTheElements) {
  std::vector<double> elements(1100 * 1000);
  for (std::size_t i = 0; i < elements.size(); ++i) elements[i] = static_cast<double>(i) + 0.25;
  std::vector<std::byte> bytes = file_bytes(header_of(1100, 1000, MatrixOrder::kColumnMajor), elements);
  const GlobalFileHeader header = verify_global_file(write_file(path("intact.rsgm"), bytes));
  EXPECT_EQ(header.rows, 1100);
  EXPECT_EQ(header.cols, 1000);
  EXPECT_EQ(header.element_bytes, 8u);
  EXPECT_EQ(header.order, MatrixOrder::kColumnMajor);
  EXPECT_EQ(header.epoch, 7u);
  bytes[bytes.size() - 8] ^= std::byte{0x40};  // the last element, in part 8, past the first 8 MiB
  const std::string damaged = write_file(path("damaged.rsgm"), bytes);
  const std::string message = message_of<CorruptionError>([&] { verify_global_file(damaged); });
  EXPECT_CONTAINS(message, "verify_global_file: file '" + damaged + "' is damaged: part 8 of 9");
  EXPECT_CONTAINS(message, "its elements are not to be used");
  bytes.resize(bytes.size() - 1);
  const std::string truncated = write_file(path("truncated.rsgm"), bytes);
  EXPECT_CONTAINS(message_of<CorruptionError>([&] { verify_global_file(truncated); }), "truncated or extended");
  EXPECT_CONTAINS(message_of<NotFoundError>([&] { verify_global_file(path("none.rsgm")); }), "none.rsgm");
}

// Headers whose checksums match but whose shapes no writer makes: refused
// as no file write_global wrote, before a size is computed from them (2^40
// x 2^40 float64 would overflow 64 bits into a small, plausible size).
TEST_F(GlobalFileReadAlone, HostileShapesAreRefusedBeforeAnySizeIsComputed) {
  struct Hostile {
    std::int64_t rows, cols;
    std::uint32_t element_bytes;
  };
  for (const Hostile& hostile : {Hostile{std::int64_t{1} << 40, std::int64_t{1} << 40, 8}, Hostile{-1, 4, 8},
                                 Hostile{4, -4, 8}, Hostile{4, 4, 2}, Hostile{4, 4, 16}}) {
    GlobalHeader header = header_of(hostile.rows, hostile.cols, MatrixOrder::kRowMajor);
    header.element_bytes = hostile.element_bytes;
    header.parts = 1;
    header.data_offset = 4096;
    std::vector<std::byte> bytes = encode_global_file_head(header, std::vector<std::uint64_t>(1, 0));
    bytes.resize(4096 + 128, std::byte{0});
    const std::string file = write_file(path("hostile.rsgm"), bytes);
    EXPECT_CONTAINS(message_of<FormatError>([&] { read_global_file_header(file); }), "write_global() does not write")
        << hostile.rows << " x " << hostile.cols << " of " << hostile.element_bytes;
  }
}

}  // namespace
}  // namespace resurgo
