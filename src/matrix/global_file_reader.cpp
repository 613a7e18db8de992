#include "matrix/global_file_reader.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <span>

#include "matrix/part_checksums.h"
#include "resurgo/errors.hpp"
#include "resurgo/global_file.hpp"

namespace resurgo {

namespace {

// A file read for its own shape, which no matrix bounds (and the header's
// checksum is no authentication): an element size other than 4 or 8, or
// rows x cols elements whose bytes do not fit in 63 bits, are no file
// write_global() made. Checked before any size is computed from them.
void check_own_shape(const GlobalHeader& written, const std::string& where) {
  constexpr std::uint64_t kMostBytes = static_cast<std::uint64_t>(INT64_MAX);
  const std::uint64_t element = written.element_bytes;
  const bool sized = element == 4 || element == 8;
  const bool fits = written.rows >= 0 && written.cols >= 0 &&
                    (written.cols == 0 ||
                     static_cast<std::uint64_t>(written.rows) <=
                         kMostBytes / std::max<std::uint64_t>(element, 1) / static_cast<std::uint64_t>(written.cols));
  if (sized && fits) return;
  throw FormatError(where + " claims a " + std::to_string(written.rows) + " x " + std::to_string(written.cols) +
                    " matrix of " + std::to_string(element) +
                    "-byte elements, which write_global() does not write (float32 or float64, at most 2^63 bytes): "
                    "give a file write_global() wrote");
}

}  // namespace

std::vector<std::byte> read_global_head(const ReadableFile& file, const GlobalHeader* here, const std::string& where) {
  const std::uint64_t size = file.size();
  std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, kGlobalHeaderBytes)));
  file.read_at(0, head.data(), head.size());
  const GlobalHeader written = decode_global_header(head, where);
  GlobalHeader own = written;
  own.byte_order = native_byte_order();
  if (here == nullptr) check_own_shape(written, where);
  check_global_header(written, here != nullptr ? *here : own, size, where);
  head.resize(kGlobalHeaderBytes + written.parts * 8);  // bounded: the parts follow from the shape, the size from both
  file.read_at(kGlobalHeaderBytes, head.data() + kGlobalHeaderBytes, written.parts * 8);
  decode_global_table(std::span<const std::byte>(head).subspan(kGlobalHeaderBytes), written, where);
  return head;
}

void check_global_parts(const std::vector<std::uint64_t>& found, const std::vector<std::uint64_t>& table,
                        const GlobalHeader& written, const std::string& where, const std::string& consequence) {
  const auto differs = std::mismatch(found.begin(), found.end(), table.begin());
  if (differs.first == found.end()) return;
  const std::uint64_t part = static_cast<std::uint64_t>(differs.first - found.begin());
  const std::uint64_t first = written.data_offset + part * written.part_bytes;
  const std::uint64_t end = std::min(first + written.part_bytes, written.file_bytes());
  throw CorruptionError(where + " is damaged: part " + std::to_string(part) + " of " + std::to_string(written.parts) +
                        " (file bytes " + std::to_string(first) + " to " + std::to_string(end) +
                        ") does not match its checksum; " + consequence +
                        ": write the file again or read another copy");
}

namespace {

// The part sums of the whole file's elements, read 8 MiB at a time: into
// `elements` when given, else each piece into one buffer of 8 MiB (a
// verification, which keeps nothing).
template <typename T>
std::vector<std::uint64_t> read_and_sum(const ReadableFile& file, const GlobalHeader& written, T* elements) {
  constexpr std::uint64_t kReadElements = (std::uint64_t{8} << 20) / sizeof(T);
  const std::uint64_t count = static_cast<std::uint64_t>(written.rows) * static_cast<std::uint64_t>(written.cols);
  std::vector<T> piece(elements == nullptr ? std::min(kReadElements, count) : 0);
  std::vector<std::uint64_t> sums(written.parts, 0);
  for (std::uint64_t first = 0; first < count; first += kReadElements) {
    const std::uint64_t n = std::min(kReadElements, count - first);
    T* into = elements != nullptr ? elements + first : piece.data();
    file.read_at(written.data_offset + first * sizeof(T), into, n * sizeof(T));
    add_part_sums(into, first, n, written.part_bytes / sizeof(T), sums);
  }
  return sums;
}

// read_and_sum of the file's element type; `elements` may be null.
std::vector<std::uint64_t> read_and_sum(const ReadableFile& file, const GlobalHeader& written, void* elements) {
  return written.element_bytes == 4 ? read_and_sum(file, written, static_cast<float*>(elements))
                                    : read_and_sum(file, written, static_cast<double*>(elements));
}

GlobalFileHeader public_header(const GlobalHeader& written) {
  return GlobalFileHeader{written.rows, written.cols, written.element_bytes, written.order, written.epoch};
}

// The checked header of `file`, and its table where asked for.
GlobalHeader checked_header(const ReadableFile& file, const std::string& where, std::vector<std::uint64_t>* table) {
  const std::vector<std::byte> head = read_global_head(file, nullptr, where);
  const GlobalHeader written = decode_global_header(head, where);
  if (table != nullptr) {
    *table = decode_global_table(std::span<const std::byte>(head).subspan(kGlobalHeaderBytes), written, where);
  }
  return written;
}

}  // namespace

GlobalFileHeader read_global_file_header(const ReadableFile& file, const std::string& where) {
  return public_header(checked_header(file, where, nullptr));
}

void read_global_file(const ReadableFile& file, const std::string& where, void* elements, std::size_t bytes) {
  std::vector<std::uint64_t> table;
  const GlobalHeader written = checked_header(file, where, &table);
  if (bytes != written.data_bytes()) {
    throw InvalidArgumentError(where + " holds " + std::to_string(written.data_bytes()) + " bytes of elements (" +
                               std::to_string(written.rows) + " x " + std::to_string(written.cols) + " " +
                               element_name(written.element_bytes) + "), not " + std::to_string(bytes) +
                               ": give a buffer of its size (read_global_file_header)");
  }
  check_global_parts(read_and_sum(file, written, elements), table, written, where, "what was read is not to be used");
}

GlobalFileHeader verify_global_file(const ReadableFile& file, const std::string& where) {
  std::vector<std::uint64_t> table;
  const GlobalHeader written = checked_header(file, where, &table);
  check_global_parts(read_and_sum(file, written, nullptr), table, written, where, "its elements are not to be used");
  return public_header(written);
}

}  // namespace resurgo
