// Chunk compression filters. kNone stores bytes as they are.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "resurgo/config.hpp"

namespace resurgo::format {

const char* codec_name(Codec codec);
bool codec_is_known(unsigned value);

// Compresses `raw` into `stored` (resized to the compressed size). Returns
// false when compression would not save space; the caller then stores raw.
bool encode(Codec codec, int level, const void* raw, std::size_t raw_bytes,
            std::vector<std::byte>& stored);

// Decompresses exactly raw_bytes into `raw`; false if the stored bytes do not
// decode to exactly that many bytes.
bool decode(Codec codec, const void* stored, std::size_t stored_bytes, void* raw,
            std::size_t raw_bytes);

}  // namespace resurgo::format
