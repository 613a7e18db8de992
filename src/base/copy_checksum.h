// A copy that also computes the checksum of the bytes it copies
// (base/checksum.h's XXH3-64, the same value), in one pass: each 64-byte
// stripe is loaded once, stored, and hashed from the register. A copy then
// a checksum pass reads every byte twice and, for states that stay in the
// CPU caches, costs about two copies; this one little more than one
// (bench/results/small_checkpoints_memory.md: restore from memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace resurgo {

// Copies `bytes` from `source` to `destination` (which must not overlap)
// and returns checksum(source, bytes), through the fastest CopyKernel this
// CPU runs (checked once, at the first call).
std::uint64_t copy_checksum(void* destination, const void* source, std::size_t bytes);

// How copy_checksum runs: a copy then the checksum of the copy (any CPU,
// and every copy of at most 240 bytes, which XXH3 hashes another way), or
// one pass with AVX2 or AVX-512 registers (x86-64, built with GCC).
enum class CopyKernel { kTwoPass, kAvx2, kAvx512 };

// Whether this build and CPU run `kernel`.
bool runs(CopyKernel kernel);
// copy_checksum through `kernel`, which must run here (the tests compare
// every kernel with checksum()).
std::uint64_t copy_checksum(CopyKernel kernel, void* destination, const void* source, std::size_t bytes);

}  // namespace resurgo
