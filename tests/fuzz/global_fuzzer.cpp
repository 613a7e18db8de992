// libFuzzer target: a ConvergentMatrix global-layout file read by one
// process (src/matrix/global_file_reader.h), as read_global_file and
// resurgo.matrix.load_global read it.
//
// Each input is an in-memory file. read_global_file_header must either
// return a header that passed its checks or throw a resurgo::Error; when it
// returns, the elements it announces lie in the input, and read_global_file
// reads them into a buffer of exactly their size (or throws a
// resurgo::Error), and verify_global_file, which keeps no element, comes
// to the same verdict (both return, or both throw an error of one code).
// The same is done for a copy whose table and header checksums are
// recomputed: without that, almost every mutation would stop
// at the header's checksum. Any other exception, a crash or a sanitizer
// report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "fuzz_input.h"
#include "matrix/global_file.h"
#include "matrix/global_file_reader.h"
#include "resurgo/errors.hpp"

namespace {

const std::string kWhere = "global_fuzzer";

using resurgo::fuzz::load64;

// 0 when `call` returns, else the code of the resurgo::Error it throws.
template <typename Call>
int outcome(const Call& call) {
  try {
    call();
  } catch (const resurgo::Error& error) {
    return static_cast<int>(error.code());
  }
  return 0;
}

void exercise(const std::uint8_t* data, std::size_t size) {
  const resurgo::fuzz::MemoryFile file(data, size, "fuzz-input.rsgm");
  resurgo::GlobalFileHeader header;
  try {
    header = resurgo::read_global_file_header(file, kWhere);
  } catch (const resurgo::Error&) {
    return;
  }
  // What the header check promises: the elements lie in the file.
  const std::uint64_t elements = static_cast<std::uint64_t>(header.rows) * static_cast<std::uint64_t>(header.cols);
  if (header.rows < 0 || header.cols < 0 || (header.element_bytes != 4 && header.element_bytes != 8) ||
      (header.cols != 0 && static_cast<std::uint64_t>(header.rows) > size / static_cast<std::uint64_t>(header.cols)) ||
      elements * header.element_bytes > size) {
    resurgo::fuzz::finding("global_fuzzer", "an accepted header announces elements the file cannot hold");
  }
  std::vector<double> buffer((elements * header.element_bytes + 7) / 8);
  const int read =
      outcome([&] { resurgo::read_global_file(file, kWhere, buffer.data(), elements * header.element_bytes); });
  const int verified = outcome([&] { resurgo::verify_global_file(file, kWhere); });
  if (read != verified) {
    resurgo::fuzz::finding("global_fuzzer", "read_global_file and verify_global_file disagree on the file");
  }
}

// A copy of the input with the checksums of its table (bytes 72-79) and of
// its header (bytes 80-87, over bytes 0-79) recomputed (global_file.h), or
// an empty vector when the part count does not fit the input or both are
// already right.
std::vector<std::uint8_t> with_fixed_checksums(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kHeader = resurgo::kGlobalHeaderBytes;
  if (size < kHeader) return {};
  const std::uint64_t parts = load64(data + 56);
  if (parts > (size - kHeader) / 8) return {};
  std::vector<std::uint8_t> copy(data, data + size);
  const std::uint64_t table = resurgo::checksum(copy.data() + kHeader, parts * 8);
  std::memcpy(copy.data() + 72, &table, sizeof table);
  const std::uint64_t head = resurgo::checksum(copy.data(), 80);
  std::memcpy(copy.data() + 80, &head, sizeof head);
  if (std::memcmp(copy.data(), data, kHeader) == 0) return {};
  return copy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return resurgo::fuzz::run_input("global_fuzzer", data, size, exercise, with_fixed_checksums);
}
