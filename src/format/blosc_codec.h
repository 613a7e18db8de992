// The blosc codecs (blosc-lz4, blosc-zstd): c-blosc 1.x shuffles the bytes or
// bits of each element of a chunk and compresses the result with lz4 or
// zstd. Shuffling is blosc's job, not ours: its SIMD shuffles are tested and
// kept by the people who maintain numcodecs and PyTables.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "resurgo/config.hpp"

namespace resurgo::format {

bool is_blosc(Codec codec);

// Compresses `raw` into `stored`; false when blosc fails or saves nothing.
// `level` is clamped to blosc's 1-9; `element_size` is the shuffle's unit.
bool blosc_encode(Codec codec, int level, Shuffle shuffle, std::size_t element_size, const void* raw,
                  std::size_t raw_bytes, std::vector<std::byte>& stored);

// Checks a blosc chunk's own header before anything is decoded: it must be
// valid for stored_bytes, name the compressor of `codec` and announce
// exactly raw_bytes. Returns "" when it does, else the disagreement.
std::string blosc_header_mismatch(Codec codec, const void* stored, std::size_t stored_bytes, std::size_t raw_bytes);

// Decompresses exactly raw_bytes; false when the header disagrees
// (blosc_header_mismatch) or the data does not decode.
bool blosc_decode(Codec codec, const void* stored, std::size_t stored_bytes, void* raw, std::size_t raw_bytes);

}  // namespace resurgo::format
