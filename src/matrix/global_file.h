// The global-layout file of ConvergentMatrix::write_global (docs/matrix.md,
// "Global-layout files"): a header, the checksum table, then the elements
// of the whole matrix in global row- or column-major order. Little-endian:
//   offset  0  magic "RSGMATGL"              8 bytes
//           8  format (1)                    uint32
//          12  element bytes (4: float32, 8: float64)  uint32
//          16  order (0 row-major, 1 column-major)      uint32
//          20  byte order of the elements (1 little, 2 big)  uint32
//          24  rows, cols                    int64 each
//          40  epoch (commits)               uint64
//          48  part bytes (a power of two)   uint64
//          56  parts                         uint64
//          64  data offset                   uint64
//          72  checksum of the table (XXH3)  uint64
//          80  checksum of bytes 0-79 (XXH3) uint64
//          88  the table: one uint64 per part (part_checksums.h)
//   data offset (the table's end rounded up to 4 KiB): the elements, in the
//   machine's representation, part k holding data bytes [k, k + 1) x part bytes.
// Every field but the epoch and the checksums follows from the shape, the
// element size and the part size, so a reader checks each against them
// before it allocates or reads anything else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "resurgo/global_file.hpp"

namespace resurgo {

inline constexpr std::size_t kGlobalHeaderBytes = 88;
inline constexpr std::uint64_t kGlobalPartBytes = std::uint64_t{1} << 20;

// 1 on a little-endian machine, 2 on a big-endian one.
std::uint32_t native_byte_order();

// How a message names the call and the file: "<call>: file '<path>'".
std::string global_file_where(const char* call, const std::string& path);

// What the header says. The sizes below follow from the shape, the element
// size and the part size; the caller has checked that the data's bytes fit
// in 63 bits (global_data_bytes()).
struct GlobalHeader {
  std::uint32_t element_bytes = 0;
  MatrixOrder order = MatrixOrder::kRowMajor;
  std::uint32_t byte_order = native_byte_order();
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::uint64_t epoch = 0;
  std::uint64_t part_bytes = kGlobalPartBytes;
  std::uint64_t parts = 0;          // as written; parts_expected() when valid
  std::uint64_t data_offset = 0;    // as written; data_offset_expected() when valid
  std::uint64_t table_checksum = 0;

  std::uint64_t data_bytes() const { return static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols) * element_bytes; }
  std::uint64_t parts_expected() const { return (data_bytes() + part_bytes - 1) / part_bytes; }
  std::uint64_t data_offset_expected() const;
  std::uint64_t file_bytes() const { return data_offset + data_bytes(); }
};

// The header of `header` (its parts and data offset computed, the table's
// checksum taken from `table`) followed by the table.
std::vector<std::byte> encode_global_file_head(GlobalHeader header, std::span<const std::uint64_t> table);

// Decodes the first kGlobalHeaderBytes of a file: FormatError for no
// global-layout file (or too short to be one) or one of another format,
// CorruptionError for a damaged header. Messages start with `where`.
GlobalHeader decode_global_header(std::span<const std::byte> bytes, const std::string& where);

// Checks a decoded header against the matrix that reads it (`here`: its
// shape and element size): MismatchError naming the field and both values
// for a file of another shape, element type or byte order; then FormatError
// for sizes that do not follow from the shape (a file no writer of this
// format made), and CorruptionError when the file is not `file_bytes` long.
void check_global_header(const GlobalHeader& written, const GlobalHeader& here, std::uint64_t file_bytes,
                         const std::string& where);

// The table from its bytes (written.parts x 8), checked against the
// header's checksum of it (CorruptionError).
std::vector<std::uint64_t> decode_global_table(std::span<const std::byte> bytes, const GlobalHeader& written,
                                               const std::string& where);

// "float32" or "float64".
const char* element_name(std::uint32_t element_bytes);

}  // namespace resurgo
