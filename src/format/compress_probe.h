// Early abort: before a chunk is compressed, a sample of it is. Data that
// does not compress (random bytes, already compressed payloads, noisy float
// mantissas) then costs one small compression instead of a whole one (and,
// for blosc, a whole shuffle), and the chunk is stored raw.
#pragma once

#include <cstddef>

#include "format/codec.h"

namespace resurgo {

// False when a sample of `raw` (a few slices spread over it) saves less than
// 1/32 of its size with `params` (a codec other than kNone): the chunk is
// then not worth compressing.
// Chunks too small for a sample to be cheaper than the chunk itself are
// always worth trying.
bool sample_compresses(const format::EncodeParams& params, const std::byte* raw, std::size_t raw_bytes);

}  // namespace resurgo
