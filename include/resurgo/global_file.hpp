// Global-layout files of ConvergentMatrix::write_global (matrix.hpp) read
// whole by one process: for a serial solver stage, a check or a conversion
// on a machine without MPI. This header needs no MPI, and libresurgo
// provides these functions whether or not it was built with MPI
// (docs/matrix.md, "Global-layout files").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace resurgo {

// The order of the elements in a global-layout file: element (i, j) of an
// M x N matrix at index i * N + j (kRowMajor, C's order) or j * M + i
// (kColumnMajor, Fortran's and ScaLAPACK's). Column-major files are written
// from and read into the local arrays directly; row-major ones are
// transposed on the way, a chunk or a message at a time (CPU time, but no
// copy of a rank's part).
enum class MatrixOrder { kRowMajor, kColumnMajor };

// The first 8 bytes of every global-layout file, by which a tool tells one
// from other files (`resurgo inspect`, `resurgo verify`).
inline constexpr char kGlobalFileMagic[8] = {'R', 'S', 'G', 'M', 'A', 'T', 'G', 'L'};

// The header, as read_global() checks it: NotFoundError, FormatError or
// CorruptionError naming the file.
struct GlobalFileHeader {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::size_t element_bytes = 0;  // 4: float32, 8: float64
  MatrixOrder order = MatrixOrder::kColumnMajor;
  std::uint64_t epoch = 0;  // the writer's commits
};
GlobalFileHeader read_global_file_header(const std::string& path);

// Every element, in the file's order, into `elements` (`bytes`: rows x cols
// x element_bytes, InvalidArgumentError otherwise), each 1 MiB part checked
// against its checksum: CorruptionError naming the file and the part, and
// then what `elements` holds is not to be used.
void read_global_file(const std::string& path, void* elements, std::size_t bytes);

// Checks the header and every part of the file against their checksums
// without keeping the elements (it holds 8 MiB at a time, whatever the
// matrix's size): a copied or archived file checked before it is used
// (`resurgo verify`). The header when the whole file is intact; else the
// errors of read_global_file_header(), or CorruptionError naming the file
// and the first damaged part.
GlobalFileHeader verify_global_file(const std::string& path);

}  // namespace resurgo
