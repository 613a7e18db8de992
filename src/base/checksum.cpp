#include "base/checksum.h"

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// Routes XXH3 calls to libxxhash's run-time dispatch (AVX2/AVX-512 where the
// CPU has them); the portable build is SSE2 only and half as fast.
#include <xxh_x86dispatch.h>
#endif

namespace resurgo {

std::uint64_t checksum(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

}  // namespace resurgo
