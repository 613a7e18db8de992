#include "matrix/global_file.h"

#include <bit>
#include <cstring>

#include "base/checksum.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr std::uint32_t kGlobalFormat = 1;
constexpr std::uint64_t kGlobalDataAlignment = 4096;
constexpr std::size_t kGlobalChecked = kGlobalHeaderBytes - 8;  // the header's bytes its checksum covers

void put_le(std::byte* at, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) at[i] = static_cast<std::byte>(value >> (8 * i));
}

std::uint64_t get_le(const std::byte* at, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return value;
}

std::string decimal(std::uint64_t value) { return std::to_string(value); }

}  // namespace

std::uint32_t native_byte_order() { return std::endian::native == std::endian::little ? 1 : 2; }

std::string global_file_where(const char* call, const std::string& path) {
  return std::string(call) + ": file '" + path + "'";
}

const char* element_name(std::uint32_t element_bytes) {
  return element_bytes == 4 ? "float32" : element_bytes == 8 ? "float64" : "an unknown element type";
}

std::uint64_t GlobalHeader::data_offset_expected() const {
  const std::uint64_t table_end = kGlobalHeaderBytes + parts_expected() * 8;
  return (table_end + kGlobalDataAlignment - 1) / kGlobalDataAlignment * kGlobalDataAlignment;
}

std::vector<std::byte> encode_global_file_head(GlobalHeader header, std::span<const std::uint64_t> table) {
  header.parts = header.parts_expected();
  header.data_offset = header.data_offset_expected();
  std::vector<std::byte> out(kGlobalHeaderBytes + table.size() * 8);
  for (std::size_t i = 0; i < table.size(); ++i) put_le(&out[kGlobalHeaderBytes + 8 * i], table[i], 8);
  header.table_checksum = checksum(out.data() + kGlobalHeaderBytes, table.size() * 8);
  std::memcpy(out.data(), kGlobalFileMagic, sizeof(kGlobalFileMagic));
  put_le(&out[8], kGlobalFormat, 4);
  put_le(&out[12], header.element_bytes, 4);
  put_le(&out[16], header.order == MatrixOrder::kRowMajor ? 0 : 1, 4);
  put_le(&out[20], header.byte_order, 4);
  put_le(&out[24], static_cast<std::uint64_t>(header.rows), 8);
  put_le(&out[32], static_cast<std::uint64_t>(header.cols), 8);
  put_le(&out[40], header.epoch, 8);
  put_le(&out[48], header.part_bytes, 8);
  put_le(&out[56], header.parts, 8);
  put_le(&out[64], header.data_offset, 8);
  put_le(&out[72], header.table_checksum, 8);
  put_le(&out[80], checksum(out.data(), kGlobalChecked), 8);
  return out;
}

GlobalHeader decode_global_header(std::span<const std::byte> bytes, const std::string& where) {
  if (bytes.size() < kGlobalHeaderBytes || std::memcmp(bytes.data(), kGlobalFileMagic, sizeof(kGlobalFileMagic)) != 0) {
    throw FormatError(where + " is no ConvergentMatrix global-layout file (no RSGMATGL header): give a file "
                              "write_global() wrote");
  }
  const std::byte* at = bytes.data();
  const auto format = static_cast<std::uint32_t>(get_le(at + 8, 4));
  if (format != kGlobalFormat) {
    throw FormatError(where + " is of global-layout format " + decimal(format) + "; this library reads format " +
                      decimal(kGlobalFormat) + ": read it with the library that wrote it");
  }
  if (get_le(at + 80, 8) != checksum(at, kGlobalChecked)) {
    throw CorruptionError(where + " is damaged: its header does not match its checksum; write the file again");
  }
  GlobalHeader header;
  header.element_bytes = static_cast<std::uint32_t>(get_le(at + 12, 4));
  header.order = get_le(at + 16, 4) == 0 ? MatrixOrder::kRowMajor : MatrixOrder::kColumnMajor;
  header.byte_order = static_cast<std::uint32_t>(get_le(at + 20, 4));
  header.rows = static_cast<std::int64_t>(get_le(at + 24, 8));
  header.cols = static_cast<std::int64_t>(get_le(at + 32, 8));
  header.epoch = get_le(at + 40, 8);
  header.part_bytes = get_le(at + 48, 8);
  header.parts = get_le(at + 56, 8);
  header.data_offset = get_le(at + 64, 8);
  header.table_checksum = get_le(at + 72, 8);
  return header;
}

void check_global_header(const GlobalHeader& written, const GlobalHeader& here, std::uint64_t file_bytes,
                         const std::string& where) {
  const auto refuse = [&](const std::string& what, const std::string& in_file, const std::string& in_matrix) {
    throw MismatchError(where + " holds " + what + " " + in_file + ", this matrix has " + in_matrix +
                        ": read it into a matrix of the file's shape and element type");
  };
  if (written.rows != here.rows || written.cols != here.cols) {
    refuse("a matrix of", decimal(written.rows) + " x " + decimal(written.cols), decimal(here.rows) + " x " + decimal(here.cols));
  }
  if (written.element_bytes != here.element_bytes) {
    refuse("elements of", element_name(written.element_bytes), element_name(here.element_bytes));
  }
  if (written.byte_order != here.byte_order) {
    refuse("elements in byte order", written.byte_order == 1 ? "little-endian" : "big-endian",
           here.byte_order == 1 ? "little-endian" : "big-endian");
  }
  const std::uint64_t part = written.part_bytes;
  if (part < written.element_bytes || part > (std::uint64_t{1} << 40) || !std::has_single_bit(part) ||
      written.parts != written.parts_expected() || written.data_offset != written.data_offset_expected()) {
    throw FormatError(where + " has parts of " + decimal(part) + " bytes, " + decimal(written.parts) +
                      " parts and its data at byte " + decimal(written.data_offset) + ", which do not follow from its " +
                      decimal(written.rows) + " x " + decimal(written.cols) + " shape: it was not written by write_global()");
  }
  if (file_bytes != written.file_bytes()) {
    throw CorruptionError(where + " is " + decimal(file_bytes) + " bytes long; its header says " +
                          decimal(written.file_bytes()) + " (truncated or extended): write the file again");
  }
}

std::vector<std::uint64_t> decode_global_table(std::span<const std::byte> bytes, const GlobalHeader& written,
                                               const std::string& where) {
  if (bytes.size() != written.parts * 8 || checksum(bytes.data(), bytes.size()) != written.table_checksum) {
    throw CorruptionError(where + " is damaged: its table of part checksums does not match its checksum; write "
                                  "the file again");
  }
  std::vector<std::uint64_t> table(written.parts);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = get_le(bytes.data() + 8 * i, 8);
  return table;
}

}  // namespace resurgo
