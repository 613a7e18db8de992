// A copy for a destination that nothing reads soon: a version captured
// into the staging buffer, which a pipeline worker reads once, later. An
// ordinary store to a line that is not in the CPU cache first reads the line
// from memory, then writes it back on eviction: a copy into cold memory
// moves three bytes over the memory bus for each byte copied. Streaming
// (non-temporal) stores write whole lines without reading them and leave the
// caches to the application's own data.
#pragma once

#include <cstddef>

namespace resurgo {

// Copies `bytes` from `source` to `destination` (which must not overlap)
// with streaming stores for the whole 64-byte lines of the destination, and
// ordinary ones for the bytes before the first and after the last; the
// stores are visible to other threads in order once it returns (a fence).
// Without SSE2 (not x86-64) it is memcpy.
void copy_around_caches(void* destination, const void* source, std::size_t bytes);

}  // namespace resurgo
