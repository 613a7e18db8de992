// Whether the ranks' blocks of a global array tile it exactly (issue 31
// part 3). Restart on another rank count fills each new block from the old
// blocks it overlaps: an element in no block would be lost, and one in two
// blocks would be read twice and written by two ranks. The check runs
// before a checkpoint of global datasets is written and before one is
// restored, so that nothing is written from a decomposition that does not
// cover the arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "auto/agreement.h"
#include "auto/dataset_table.h"

namespace resurgo::autockpt {

// One rank's block: its element offset in the global array and its shape.
struct Block {
  std::vector<std::int64_t> offset;
  std::vector<std::int64_t> shape;
};

// Why `blocks` (indexed by rank, inside the array) do not tile
// `global_shape`: the first two ranks whose blocks overlap, else an element
// that no block holds; empty when they tile it.
std::string cover_problem(const std::vector<std::int64_t>& global_shape, const std::vector<Block>& blocks);

// The same for every dataset declared as a block of a global array, the
// ranks' blocks gathered through `agreement` (collective): the first
// dataset whose blocks do not tile its array, named, or the ranks' datasets
// when they declared others; empty when every array is tiled.
std::string blocks_problem(const DatasetTable& datasets, Agreement& agreement);

}  // namespace resurgo::autockpt
