// The checksum of every stored byte (chunks, headers, manifests, the
// automatic runtime's dataset hashes): XXH3, 64 bits. Integrity, not
// authentication: it finds damage, not a forger.
#pragma once

#include <cstddef>
#include <cstdint>

namespace resurgo {

std::uint64_t checksum(const void* data, std::size_t bytes);

}  // namespace resurgo
