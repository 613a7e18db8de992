// Chunk compression filters. kNone stores bytes as they are; the blosc
// codecs shuffle by element size first (format/blosc_codec.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resurgo/config.hpp"

namespace resurgo::format {

bool codec_is_known(unsigned value);

// How one chunk is compressed. shuffle and element_size matter to the blosc
// codecs only; level is zstd's 1-19 (blosc clamps it to its 1-9).
struct EncodeParams {
  Codec codec = Codec::kNone;
  int level = 1;
  Shuffle shuffle = Shuffle::kNone;
  std::size_t element_size = 1;
};

// Compresses `raw` into `stored` (resized to the compressed size). Returns
// false when compression would not save space; the caller then stores raw.
bool encode(const EncodeParams& params, const void* raw, std::size_t raw_bytes, std::vector<std::byte>& stored);

// What a codec's own framing says against the chunk record, checked before
// decoding: "" when it agrees (always for lz4, which has no header of its
// own), else the disagreement. A zstd frame must declare exactly raw_bytes
// as its content size, a blosc header announce them (blosc_header_mismatch).
std::string framing_mismatch(Codec codec, const void* stored, std::size_t stored_bytes, std::size_t raw_bytes);

// The most bytes `stored_bytes` of `codec` can decode to: stored_bytes times
// the codec's largest compression ratio (docs/format.md, "Limits"). A chunk
// claiming more raw bytes is refused before any buffer is sized for it.
std::uint64_t max_decoded_bytes(Codec codec, std::uint64_t stored_bytes);

// Decompresses exactly raw_bytes into `raw`; false if the stored bytes do not
// decode to exactly that many bytes.
bool decode(Codec codec, const void* stored, std::size_t stored_bytes, void* raw,
            std::size_t raw_bytes);

}  // namespace resurgo::format
