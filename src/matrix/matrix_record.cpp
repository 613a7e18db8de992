#include "matrix/matrix_record.h"

#include <cstring>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

constexpr char kMagic[8] = {'R', 'S', 'G', 'M', 'A', 'T', '1', '\0'};
constexpr std::uint32_t kFormat = 1;
constexpr std::size_t kRecordBytes = 64;

void put(std::vector<std::byte>& out, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

// Reads fields in order; the caller bounded the record's length first.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  std::uint64_t get(std::size_t bytes) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i) value |= static_cast<std::uint64_t>(in_[at_ + i]) << (8 * i);
    at_ += bytes;
    return value;
  }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = sizeof(kMagic);
};

}  // namespace

std::vector<std::byte> encode_record(const MatrixRecord& record) {
  std::vector<std::byte> out(reinterpret_cast<const std::byte*>(kMagic),
                             reinterpret_cast<const std::byte*>(kMagic) + sizeof(kMagic));
  const MatrixLayout& layout = record.layout;
  put(out, kFormat, 4);
  put(out, record.epoch, 8);
  for (const std::int64_t value : {layout.rows, layout.cols, layout.row_block, layout.col_block}) {
    put(out, static_cast<std::uint64_t>(value), 8);
  }
  put(out, static_cast<std::uint32_t>(layout.grid_rows), 4);
  put(out, static_cast<std::uint32_t>(layout.grid_cols), 4);
  put(out, record.element_bytes, 4);
  return out;
}

MatrixRecord decode_record(std::span<const std::byte> metadata, int version) {
  const std::string where = "ConvergentMatrix::restart: version " + std::to_string(version);
  if (metadata.size() < kRecordBytes || std::memcmp(metadata.data(), kMagic, sizeof(kMagic)) != 0) {
    throw FormatError(where + " holds no matrix record in its metadata (" + std::to_string(metadata.size()) +
                      " bytes): it was not written by ConvergentMatrix::checkpoint");
  }
  Reader reader(metadata);
  const auto format = static_cast<std::uint32_t>(reader.get(4));
  if (format != kFormat) {
    throw FormatError(where + " has a matrix record of format " + std::to_string(format) + "; this library reads " +
                      std::to_string(kFormat) + ": restart with the library that wrote it");
  }
  MatrixRecord record;
  record.epoch = reader.get(8);
  for (std::int64_t* field :
       {&record.layout.rows, &record.layout.cols, &record.layout.row_block, &record.layout.col_block}) {
    *field = static_cast<std::int64_t>(reader.get(8));
  }
  record.layout.grid_rows = static_cast<int>(static_cast<std::int32_t>(reader.get(4)));
  record.layout.grid_cols = static_cast<int>(static_cast<std::int32_t>(reader.get(4)));
  record.element_bytes = static_cast<std::uint32_t>(reader.get(4));
  return record;
}

void check_same_layout(const MatrixRecord& written, const MatrixRecord& here, int version) {
  const struct {
    const char* name;
    std::int64_t written;
    std::int64_t here;
  } fields[] = {
      {"rows", written.layout.rows, here.layout.rows},
      {"cols", written.layout.cols, here.layout.cols},
      {"row_block", written.layout.row_block, here.layout.row_block},
      {"col_block", written.layout.col_block, here.layout.col_block},
      {"grid_rows", written.layout.grid_rows, here.layout.grid_rows},
      {"grid_cols", written.layout.grid_cols, here.layout.grid_cols},
      {"element bytes", written.element_bytes, here.element_bytes},
  };
  for (const auto& field : fields) {
    if (field.written == field.here) continue;
    throw MismatchError("ConvergentMatrix::restart: version " + std::to_string(version) + " was written with " +
                        field.name + " " + std::to_string(field.written) + ", this matrix has " +
                        std::to_string(field.here) +
                        ": open the matrix with the layout it was written with (to go on with another grid, rank "
                        "count or block size, read a file write_global() wrote: read_global(), docs/matrix.md)");
  }
}

}  // namespace resurgo
