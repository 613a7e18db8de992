#include "format/blosc_codec.h"

#include <blosc.h>

#include <algorithm>

namespace resurgo::format {

namespace {

// Chunks are already compressed in parallel on the pipeline's threads, so
// blosc must not start threads of its own.
constexpr int kInternalThreads = 1;

const char* compressor_of(Codec codec) {
  return codec == Codec::kBloscZstd ? BLOSC_ZSTD_COMPNAME : BLOSC_LZ4_COMPNAME;
}

// The library name blosc_cbuffer_complib reports for a chunk of `codec`.
const char* library_of(Codec codec) { return codec == Codec::kBloscZstd ? BLOSC_ZSTD_LIBNAME : BLOSC_LZ4_LIBNAME; }

int shuffle_flag(Shuffle shuffle) {
  switch (shuffle) {
    case Shuffle::kNone: return BLOSC_NOSHUFFLE;
    case Shuffle::kByte: return BLOSC_SHUFFLE;
    case Shuffle::kBit: return BLOSC_BITSHUFFLE;
  }
  return BLOSC_NOSHUFFLE;
}

}  // namespace

bool is_blosc(Codec codec) { return codec == Codec::kBloscLz4 || codec == Codec::kBloscZstd; }

bool blosc_encode(Codec codec, int level, Shuffle shuffle, std::size_t element_size, const void* raw,
                  std::size_t raw_bytes, std::vector<std::byte>& stored) {
  if (raw_bytes > static_cast<std::size_t>(BLOSC_MAX_BUFFERSIZE)) return false;
  // blosc takes element sizes of 1 to 255 bytes; a larger one (no NumPy
  // dtype has one) is passed as 1, as is 0.
  const std::size_t typesize = element_size <= BLOSC_MAX_TYPESIZE ? std::max<std::size_t>(element_size, 1) : 1;
  stored.resize(raw_bytes + BLOSC_MAX_OVERHEAD);
  const int written = blosc_compress_ctx(std::clamp(level, 1, 9), shuffle_flag(shuffle), typesize, raw_bytes, raw,
                                         stored.data(), stored.size(), compressor_of(codec), 0, kInternalThreads);
  if (written <= 0 || static_cast<std::size_t>(written) >= raw_bytes) return false;
  stored.resize(static_cast<std::size_t>(written));
  return true;
}

std::string blosc_header_mismatch(Codec codec, const void* stored, std::size_t stored_bytes, std::size_t raw_bytes) {
  std::size_t announced = 0;
  if (blosc_cbuffer_validate(stored, stored_bytes, &announced) != 0) {
    return "its blosc header is invalid for " + std::to_string(stored_bytes) + " stored bytes";
  }
  if (announced != raw_bytes) {
    return "its blosc header announces " + std::to_string(announced) + " bytes but the chunk holds " +
           std::to_string(raw_bytes);
  }
  const char* named = blosc_cbuffer_complib(stored);  // null for a compressor this blosc does not know
  const std::string library = named != nullptr ? named : "unknown";
  if (library != library_of(codec)) {
    return "its blosc header names compressor '" + library + "', not " + library_of(codec);
  }
  return "";
}

bool blosc_decode(Codec codec, const void* stored, std::size_t stored_bytes, void* raw, std::size_t raw_bytes) {
  if (!blosc_header_mismatch(codec, stored, stored_bytes, raw_bytes).empty()) return false;
  const int out = blosc_decompress_ctx(stored, raw, raw_bytes, kInternalThreads);
  return out > 0 && static_cast<std::size_t>(out) == raw_bytes;
}

}  // namespace resurgo::format
