#include "format/codec.h"

#include <lz4.h>
#include <zstd.h>

#include <climits>
#include <cstring>
#include <limits>

#include "format/blosc_codec.h"
#include "format/bytes.h"

namespace resurgo::format {

namespace {

// The largest ratio of raw to stored bytes a codec's output can reach. An
// LZ4 sequence adds at most 255 bytes of match per byte of input; a zstd
// block (at most 128 KiB) takes at least 4 bytes, as an RLE block. A blosc
// buffer holds its internal compressor's output plus headers of its own.
std::uint64_t max_ratio(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return 1;
    case Codec::kLz4:
    case Codec::kBloscLz4:
      return 255;
    case Codec::kZstd:
    case Codec::kBloscZstd:
      return 32768;
  }
  return 1;
}

std::string zstd_frame_mismatch(const void* stored, std::size_t stored_bytes, std::size_t raw_bytes) {
  const unsigned long long declared = ZSTD_getFrameContentSize(stored, stored_bytes);
  if (declared == ZSTD_CONTENTSIZE_ERROR) return "it is not a zstd frame";
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN) return "its zstd frame does not declare its content size";
  if (declared != raw_bytes) {
    return "its zstd frame declares " + std::to_string(declared) + " bytes but the chunk holds " +
           std::to_string(raw_bytes);
  }
  return "";
}

}  // namespace

bool codec_is_known(unsigned value) { return value <= static_cast<unsigned>(Codec::kBloscZstd); }

bool encode(const EncodeParams& params, const void* raw, std::size_t raw_bytes, std::vector<std::byte>& stored) {
  switch (params.codec) {
    case Codec::kNone:
      return false;
    case Codec::kLz4: {
      if (raw_bytes > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE)) return false;
      const int input = static_cast<int>(raw_bytes);
      stored.resize(static_cast<std::size_t>(LZ4_compressBound(input)));
      const int written = LZ4_compress_default(static_cast<const char*>(raw),
                                               reinterpret_cast<char*>(stored.data()), input,
                                               static_cast<int>(stored.size()));
      if (written <= 0 || static_cast<std::size_t>(written) >= raw_bytes) return false;
      stored.resize(static_cast<std::size_t>(written));
      return true;
    }
    case Codec::kZstd: {
      stored.resize(ZSTD_compressBound(raw_bytes));
      const std::size_t written = ZSTD_compress(stored.data(), stored.size(), raw, raw_bytes, params.level);
      if (ZSTD_isError(written) || written >= raw_bytes) return false;
      stored.resize(written);
      return true;
    }
    case Codec::kBloscLz4:
    case Codec::kBloscZstd:
      return blosc_encode(params.codec, params.level, params.shuffle, params.element_size, raw, raw_bytes, stored);
  }
  return false;
}

std::string framing_mismatch(Codec codec, const void* stored, std::size_t stored_bytes, std::size_t raw_bytes) {
  if (is_blosc(codec)) return blosc_header_mismatch(codec, stored, stored_bytes, raw_bytes);
  if (codec == Codec::kZstd) return zstd_frame_mismatch(stored, stored_bytes, raw_bytes);
  return "";
}

std::uint64_t max_decoded_bytes(Codec codec, std::uint64_t stored_bytes) {
  return checked_mul(stored_bytes, max_ratio(codec)).value_or(std::numeric_limits<std::uint64_t>::max());
}

bool decode(Codec codec, const void* stored, std::size_t stored_bytes, void* raw,
            std::size_t raw_bytes) {
  switch (codec) {
    case Codec::kNone:
      if (stored_bytes != raw_bytes) return false;
      std::memcpy(raw, stored, raw_bytes);
      return true;
    case Codec::kLz4: {
      if (stored_bytes > INT_MAX || raw_bytes > INT_MAX) return false;
      const int out = LZ4_decompress_safe(static_cast<const char*>(stored), static_cast<char*>(raw),
                                          static_cast<int>(stored_bytes), static_cast<int>(raw_bytes));
      return out >= 0 && static_cast<std::size_t>(out) == raw_bytes;
    }
    case Codec::kZstd: {
      const std::size_t out = ZSTD_decompress(raw, raw_bytes, stored, stored_bytes);
      return !ZSTD_isError(out) && out == raw_bytes;
    }
    case Codec::kBloscLz4:
    case Codec::kBloscZstd:
      return blosc_decode(codec, stored, stored_bytes, raw, raw_bytes);
  }
  return false;
}

}  // namespace resurgo::format
