// libFuzzer target: the container reader (format/container.h).
//
// Each input is an in-memory container file. read_container must either
// return a container that passed its checks or throw a resurgo::Error; when
// it returns, every chunk is read and verified (verify_chunks), and every
// chunk is decoded once more with its checksum taken from the bytes, so the
// decoders see fuzzed compressed data. The same is done for a copy of the
// input whose footer checksum is recomputed: without that, almost every
// mutation would stop at the header+index checksum. Any other exception, a
// crash or a sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format/container.h"
#include "fuzz_input.h"
#include "resurgo/errors.hpp"

namespace {

using resurgo::format::ChunkRecord;
using resurgo::format::Container;

// Decoded bytes allowed per input; a chunk may claim up to 32768 times its
// stored bytes (docs/format.md, "Limits"), and this harness decodes every
// chunk into a buffer of that size.
constexpr std::uint64_t kMaxRawBytes = 64u << 20;

using resurgo::fuzz::load64;

[[noreturn]] void finding(const char* what) { resurgo::fuzz::finding("container_fuzzer", what); }

template <class F>
void expect_resurgo_error(F&& f) {
  try {
    f();
  } catch (const resurgo::Error&) {
  }
}

void exercise(const std::uint8_t* data, std::size_t size) {
  const resurgo::fuzz::MemoryFile file(data, size, "fuzz-input.rsg");
  Container container;
  try {
    container = resurgo::format::read_container(file);
  } catch (const resurgo::Error&) {
    return;
  }
  // What read_container promises about an accepted file.
  if (container.file_size != size) finding("file_size differs from the file's size");
  std::uint64_t total = 0;
  for (const ChunkRecord& chunk : container.chunks) {
    if (chunk.region >= container.header.regions.size()) finding("chunk names a region that does not exist");
    if (chunk.file_offset > size || chunk.stored_length > size - chunk.file_offset) {
      finding("accepted chunk lies outside the file");
    }
    total += chunk.raw_length;  // each at most 1 GiB, at most size/56 chunks
  }
  if (total > kMaxRawBytes) return;

  expect_resurgo_error([&] { resurgo::format::verify_chunks(file, container, [](std::uint64_t, std::uint64_t) {}); });

  std::vector<std::byte> raw;
  std::vector<std::byte> scratch;
  for (ChunkRecord chunk : container.chunks) {
    chunk.checksum = resurgo::format::checksum(data + chunk.file_offset, chunk.stored_length);
    raw.assign(chunk.raw_length, std::byte{0});
    expect_resurgo_error([&] { resurgo::format::read_chunk(file, container, chunk, raw.data(), scratch); });
  }
}

// A copy of the input with the footer's header+index checksum recomputed, or
// an empty vector when the footer's layout fields do not allow it or the
// checksum is already right.
std::vector<std::uint8_t> with_fixed_checksum(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kFooter = resurgo::format::kFooterBytes;
  if (size < 24 + kFooter) return {};
  const std::uint8_t* footer = data + size - kFooter;
  const std::uint64_t header_length = load64(footer);
  const std::uint64_t index_offset = load64(footer + 8);
  const std::uint64_t index_length = load64(footer + 16);
  const std::uint64_t index_end = size - kFooter;
  if (header_length > index_end || index_offset < header_length || index_offset > index_end ||
      index_length != index_end - index_offset) {
    return {};
  }
  std::vector<std::uint8_t> covered(data, data + header_length);
  covered.insert(covered.end(), data + index_offset, data + index_end);
  const std::uint64_t sum = resurgo::format::checksum(covered.data(), covered.size());
  if (sum == load64(footer + 24)) return {};
  std::vector<std::uint8_t> copy(data, data + size);
  std::memcpy(copy.data() + size - kFooter + 24, &sum, sizeof sum);
  return copy;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return resurgo::fuzz::run_input("container_fuzzer", data, size, exercise, with_fixed_checksum);
}
