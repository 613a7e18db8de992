// What ConvergentMatrix::checkpoint records in the store's version metadata,
// so that restart can refuse a version written with another layout before
// reading it, and restore the epoch. A fixed 64-byte little-endian record:
//   offset  0  magic "RSGMAT1\0"        8 bytes
//           8  format (1)                uint32
//          12  epoch (commits)           uint64
//          20  rows, cols                int64 each
//          36  row_block, col_block      int64 each
//          52  grid_rows, grid_cols      int32 each
//          60  element size (4 or 8)     uint32
// A newer format may only grow the record; readers check the magic, the
// format and the length first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "resurgo/matrix.hpp"

namespace resurgo {

struct MatrixRecord {
  std::uint64_t epoch = 0;
  MatrixLayout layout;  // grid filled in
  std::uint32_t element_bytes = 0;
};

std::vector<std::byte> encode_record(const MatrixRecord& record);
// FormatError naming `version` when the metadata holds no record this code reads.
MatrixRecord decode_record(std::span<const std::byte> metadata, int version);
// MismatchError naming the first field that differs, both values and
// `version`: "ConvergentMatrix::restart: version 3 was written with
// row_block 64, this matrix has 32: ...".
void check_same_layout(const MatrixRecord& written, const MatrixRecord& here, int version);

}  // namespace resurgo
