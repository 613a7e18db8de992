// What a global-layout file's data goes through on one rank, without MPI
// calls: the part checksums (src/matrix/part_checksums.h), whose vectorized
// sum must stay the formula files were written with, the rows of a local
// array to and from row-major order (local_rows.h), and the chunk loops
// (file_pieces.h). The matrix sources exist only in a build with MPI.
#ifdef RESURGO_HAVE_MPI

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "matrix/file_pieces.h"
#include "matrix/local_rows.h"
#include "matrix/part_checksums.h"
#include "matrix/transpose.h"

namespace resurgo {
namespace {

// The formula of part_checksums.h, one term at a time.
template <typename T>
std::uint64_t reference_term(std::uint64_t index, T value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  std::uint64_t x = bits + index * 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
std::vector<T> arbitrary(std::size_t count) {
  std::vector<T> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<T>(i * 7919 % 1009) * T(0.37) - T(91);
  return values;
}

template <typename T>
void expect_reference_sums() {
  const std::vector<T> values = arbitrary<T>(200);
  constexpr std::uint64_t kPart = 16;
  // Starts and lengths off the vectors' eight lanes, across parts' ends.
  for (std::uint64_t first : {0, 1, 7, 13, 40}) {
    for (std::uint64_t count : {0, 1, 7, 8, 9, 31, 150}) {
      std::vector<std::uint64_t> sums(20, 0), wanted(20, 0);
      add_part_sums(values.data(), first, count, kPart, sums);
      for (std::uint64_t i = 0; i < count; ++i) wanted[(first + i) / kPart] += reference_term(first + i, values[i]);
      EXPECT_EQ(sums, wanted) << "first " << first << ", count " << count;
    }
  }
}

TEST(MatrixFilePiecesTest, PartSumsAreTheFormulaTermByTerm) {
  expect_reference_sums<float>();
  expect_reference_sums<double>();
}

// Every shape up to 40 x 40, around the AVX2 squares (8 x 8 floats, 4 x 4
// doubles) and their bands of two: each element lands transposed, and the
// destination's padding past `rows` in each line is left as it was.
template <typename T>
void expect_transposed(std::int64_t rows, std::int64_t cols) {
  const std::int64_t source_stride = cols + 3;
  const std::int64_t destination_stride = rows + 5;
  std::vector<T> source(static_cast<std::size_t>(rows * source_stride + 1));
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<T>(i);
  std::vector<T> destination(static_cast<std::size_t>(cols * destination_stride + 1), T(-1));
  transpose(source.data(), source_stride, destination.data(), destination_stride, rows, cols);
  for (std::int64_t c = 0; c < cols; ++c) {
    for (std::int64_t r = 0; r < destination_stride; ++r) {
      const T wanted = r < rows ? source[r * source_stride + c] : T(-1);
      ASSERT_EQ(destination[c * destination_stride + r], wanted) << rows << " x " << cols << ", at " << r << ", " << c;
    }
  }
  EXPECT_EQ(destination.back(), T(-1));
}

TEST(MatrixFilePiecesTest, TransposeMovesEveryElementAndNothingElse) {
  for (std::int64_t rows = 0; rows <= 40; ++rows) {
    for (std::int64_t cols = 0; cols <= 40; ++cols) {
      expect_transposed<float>(rows, cols);
      expect_transposed<double>(rows, cols);
    }
  }
}

TEST(MatrixFilePiecesTest, LocalRowsGoToRowMajorOrderAndBack) {
  constexpr std::int64_t kRows = 37, kCols = 21, kLld = 40;
  std::vector<double> storage(kLld * kCols, -1);
  for (std::int64_t j = 0; j < kCols; ++j) {
    for (std::int64_t i = 0; i < kRows; ++i) storage[j * kLld + i] = static_cast<double>(i * 1000 + j);
  }
  const LocalRows<double> rows{storage.data(), kLld, kCols};
  std::vector<double> out(5 * kCols);
  rows.copy_out(17, 5, out.data());
  for (std::int64_t i = 0; i < 5; ++i) {
    for (std::int64_t j = 0; j < kCols; ++j) EXPECT_EQ(out[i * kCols + j], static_cast<double>((17 + i) * 1000 + j));
  }
  for (double& value : out) value = -value;
  rows.copy_in(17, 5, out.data());
  EXPECT_EQ(storage[3 * kLld + 18], -18003.0);
  EXPECT_EQ(storage[3 * kLld + 16],
            16003.0);  // rows outside the stretch are untouched
  EXPECT_EQ(storage[3 * kLld + kRows],
            -1.0);  // and so is the padding below the rows
}

// What read_global's slab exchange hands a row-major file's owner, and
// write_global's takes from it: stretches of its rows in row-major order
// that start and end anywhere, each put in place in the column-major local
// array, transposed, and taken back out.
TEST(MatrixFilePiecesTest, StretchesOfRowsMoveToAndFromTheLocalArrayWhereverTheyStartAndEnd) {
  constexpr std::int64_t kRows = 29, kCols = 13, kLld = 31;
  std::vector<float> row_major(kRows * kCols);
  for (std::size_t i = 0; i < row_major.size(); ++i) row_major[i] = static_cast<float>(i);
  for (std::uint64_t stretch : {1, 5, 13, 14, 40, 377}) {
    std::vector<float> storage(kLld * kCols, -1);
    const LocalRows<float> rows{storage.data(), kLld, kCols};
    for (std::uint64_t at = 0; at < row_major.size(); at += stretch) {
      rows.copy_in_at(at, &row_major[at], std::min<std::uint64_t>(stretch, row_major.size() - at));
    }
    for (std::int64_t j = 0; j < kCols; ++j) {
      for (std::int64_t i = 0; i < kLld; ++i) {
        const float wanted = i < kRows ? static_cast<float>(i * kCols + j) : -1.0f;  // padding untouched
        ASSERT_EQ(storage[j * kLld + i], wanted) << "stretches of " << stretch << ", row " << i << ", column " << j;
      }
    }
    std::vector<float> taken(row_major.size(), -1);
    for (std::uint64_t at = 0; at < row_major.size(); at += stretch) {
      rows.copy_out_at(at, std::min<std::uint64_t>(stretch, row_major.size() - at), &taken[at]);
    }
    ASSERT_EQ(taken, row_major) << "stretches of " << stretch;
  }
}

// A piece through the copies, in chunks of 3 elements: each chunk is
// written where it belongs in file order and summed; reading puts it back.
TEST(MatrixFilePiecesTest, ChunksCoverAPieceInOrderAndSumAsAWhole) {
  const std::vector<float> memory = arbitrary<float>(50);
  std::vector<float> file(64, 0);
  std::vector<Piece<float>> pieces(2);
  pieces[0] = Piece<float>{.first = 3, .count = 20, .chunk = 3};
  pieces[0].copy_out = [&](std::uint64_t at, std::uint64_t n, float* out) { std::memcpy(out, &memory[at], n * 4); };
  pieces[1] = Piece<float>{.first = 30, .count = 30, .chunk = 7, .in_place = const_cast<float*>(&memory[20])};
  std::vector<std::uint64_t> sums(8, 0), wanted(8, 0);
  std::map<std::uint64_t, std::uint64_t> calls;
  write_pieces<float>(pieces, 8, sums, [&](std::uint64_t first, const float* data, std::uint64_t n) {
    std::memcpy(&file[first], data, n * 4);
    calls[first] = n;
  });
  add_part_sums(&memory[0], 3, 20, 8, wanted);
  add_part_sums(&memory[20], 30, 30, 8, wanted);
  EXPECT_EQ(sums, wanted);
  EXPECT_EQ(calls.size(), 7u + 5u);
  EXPECT_EQ(calls.at(21), 2u);  // the last chunk of the first piece is short
  EXPECT_EQ(std::memcmp(&file[3], &memory[0], 20 * 4), 0);
  EXPECT_EQ(std::memcmp(&file[30], &memory[20], 30 * 4), 0);

  std::vector<float> back(20, 0);
  pieces[0].copy_in = [&](std::uint64_t at, std::uint64_t n, const float* in) { std::memcpy(&back[at], in, n * 4); };
  std::vector<std::uint64_t> read_sums(8, 0);
  read_pieces<float>({pieces[0]}, 8, read_sums, [&](std::uint64_t first, float* data, std::uint64_t n) {
    std::memcpy(data, &file[first], n * 4);
  });
  EXPECT_EQ(std::memcmp(back.data(), memory.data(), 20 * 4), 0);
}

}  // namespace
}  // namespace resurgo

#endif  // RESURGO_HAVE_MPI
