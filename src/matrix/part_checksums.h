// The checksums of a global-layout file's data parts (global_file.h),
// computed where the elements are, whatever the grid. Part k's checksum is
// the sum, modulo 2^64, of mix(i, bits of element i) over the elements i
// (their index in file order) that lie in part k. A sum does not depend on
// who adds which terms: each rank adds those of its own elements and one
// MPI_Allreduce gives the file's table, when written on one grid and when
// read on any other, without moving an element. mix is a 64-bit finalizer of
// the index and the bits together, so a changed, moved, zeroed or lost
// element changes its part's sum but with probability 2^-64. Integrity, not
// authentication, as base/checksum.h.
#pragma once

#include <cstdint>
#include <vector>

#include "matrix/block_cyclic.h"
#include "resurgo/matrix.hpp"

namespace resurgo {

// This rank's terms of every part's sum: `parts` sums for the local array
// `storage` of `rank` (column-major, leading dimension as the layout says),
// the file in `order` with parts of `part_elements` elements (a power of two).
template <typename T>
std::vector<std::uint64_t> local_part_sums(const BlockCyclic& layout, int rank, const T* storage, MatrixOrder order,
                                           std::uint64_t part_elements, std::uint64_t parts);

}  // namespace resurgo
