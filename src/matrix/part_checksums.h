// The checksums of a global-layout file's data parts (global_file.h).
// Part k's checksum is the sum, modulo 2^64, of mix(i, bits of element i)
// over the elements i (their index in file order) that lie in part k. A sum
// does not depend on who adds which terms: each rank adds those of the
// elements it writes or reads (matrix_io.cpp) and one MPI_Allreduce gives
// the file's table, whatever the grid that writes or reads it. mix is a 64-bit finalizer of the index and the bits together,
// so a changed, moved, zeroed or lost element changes its part's sum but
// with probability 2^-64. Integrity, not authentication, as base/checksum.h.
#pragma once

#include <cstdint>
#include <vector>

namespace resurgo {

// Adds into `sums` (one per part) the terms of the file elements [first,
// first + count), which `elements` holds in file order; parts of
// `part_elements` elements (a power of two).
template <typename T>
void add_part_sums(const T* elements, std::uint64_t first, std::uint64_t count, std::uint64_t part_elements,
                   std::vector<std::uint64_t>& sums);

}  // namespace resurgo
