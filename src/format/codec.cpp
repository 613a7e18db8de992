#include "format/codec.h"

#include <lz4.h>
#include <zstd.h>

#include <climits>
#include <cstring>

#include "format/blosc_codec.h"

namespace resurgo::format {


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
  return is_blosc(codec) ? blosc_header_mismatch(codec, stored, stored_bytes, raw_bytes) : std::string();
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
