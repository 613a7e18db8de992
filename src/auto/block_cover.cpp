#include "auto/block_cover.h"

#include <algorithm>
#include <set>

namespace resurgo::autockpt {

namespace {

// Searching a gap tries every corner of the blocks' grid: bounded, so that
// a huge job still gets the overlap check and the count of elements.
constexpr std::uint64_t kMaxGapProbes = 1'000'000;

std::uint64_t volume(const std::vector<std::int64_t>& shape) {
  std::uint64_t elements = 1;
  for (const std::int64_t extent : shape) elements *= static_cast<std::uint64_t>(extent);
  return elements;
}

std::string box_text(const std::vector<std::int64_t>& low, const std::vector<std::int64_t>& high) {
  std::string text;
  for (std::size_t axis = 0; axis < low.size(); ++axis) {
    text += (axis == 0 ? "[" : " x [") + std::to_string(low[axis]) + ", " + std::to_string(high[axis]) + ")";
  }
  return text;
}

std::string block_text(const Block& block) {
  std::vector<std::int64_t> high(block.offset.size());
  for (std::size_t axis = 0; axis < high.size(); ++axis) high[axis] = block.offset[axis] + block.shape[axis];
  return box_text(block.offset, high);
}

bool holds(const Block& block, const std::vector<std::int64_t>& index) {
  for (std::size_t axis = 0; axis < index.size(); ++axis) {
    if (index[axis] < block.offset[axis] || index[axis] >= block.offset[axis] + block.shape[axis]) return false;
  }
  return true;
}

std::string overlap(const std::vector<Block>& blocks) {
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    for (std::size_t b = a + 1; b < blocks.size(); ++b) {
      std::vector<std::int64_t> low(blocks[a].offset.size());
      std::vector<std::int64_t> high(low.size());
      bool meet = volume(blocks[a].shape) > 0 && volume(blocks[b].shape) > 0;
      for (std::size_t axis = 0; meet && axis < low.size(); ++axis) {
        low[axis] = std::max(blocks[a].offset[axis], blocks[b].offset[axis]);
        high[axis] = std::min(blocks[a].offset[axis] + blocks[a].shape[axis],
                              blocks[b].offset[axis] + blocks[b].shape[axis]);
        meet = low[axis] < high[axis];
      }
      if (meet) {
        return "rank " + std::to_string(a) + "'s block " + block_text(blocks[a]) + " and rank " + std::to_string(b) +
               "'s block " + block_text(blocks[b]) + " overlap in " + box_text(low, high);
      }
    }
  }
  return "";
}

// An element in no block, if one is found among the corners of the blocks'
// grid: every uncovered region has one there, since membership changes only
// at a block's edge.
std::string gap(const std::vector<std::int64_t>& global_shape, const std::vector<Block>& blocks) {
  std::vector<std::vector<std::int64_t>> edges(global_shape.size());
  std::uint64_t probes = 1;
  for (std::size_t axis = 0; axis < global_shape.size(); ++axis) {
    std::set<std::int64_t> cuts{0};
    for (const Block& block : blocks) {
      for (const std::int64_t cut : {block.offset[axis], block.offset[axis] + block.shape[axis]}) {
        if (cut < global_shape[axis]) cuts.insert(cut);
      }
    }
    edges[axis].assign(cuts.begin(), cuts.end());
    probes *= edges[axis].size();
    if (probes > kMaxGapProbes) return "";
  }
  std::vector<std::size_t> at(global_shape.size(), 0);
  std::vector<std::int64_t> index(global_shape.size());
  for (std::uint64_t probe = 0; probe < probes; ++probe) {
    std::uint64_t rest = probe;
    for (std::size_t axis = global_shape.size(); axis-- > 0;) {
      at[axis] = rest % edges[axis].size();
      rest /= edges[axis].size();
      index[axis] = edges[axis][at[axis]];
    }
    if (std::none_of(blocks.begin(), blocks.end(), [&](const Block& block) { return holds(block, index); })) {
      std::string element;
      for (const std::int64_t i : index) element += (element.empty() ? "" : ", ") + std::to_string(i);
      return ": element (" + element + ") is in no rank's block";
    }
  }
  return "";
}

}  // namespace

std::string cover_problem(const std::vector<std::int64_t>& global_shape, const std::vector<Block>& blocks) {
  if (std::string overlaps = overlap(blocks); !overlaps.empty()) return overlaps;
  std::uint64_t held = 0;
  for (const Block& block : blocks) held += volume(block.shape);
  const std::uint64_t total = volume(global_shape);
  if (held == total) return "";
  return "the " + std::to_string(blocks.size()) + " ranks' blocks hold " + std::to_string(held) + " of its " +
         std::to_string(total) + " elements, leaving a gap" + gap(global_shape, blocks);
}

std::string blocks_problem(const DatasetTable& datasets, Agreement& agreement) {
  // Half the hash: the gather carries a long.
  const std::vector<long> declared = agreement.everyone(static_cast<long>(datasets.declarations_hash() >> 1));
  for (std::size_t rank = 1; rank < declared.size(); ++rank) {
    if (declared[rank] != declared[0]) {
      return "rank " + std::to_string(rank) + " declared other datasets than rank 0 (names, types or global "
             "shapes); every rank must declare the same datasets in the same order";
    }
  }
  for (std::size_t id = 0; id < datasets.size(); ++id) {
    const Dataset& dataset = datasets[static_cast<int>(id)];
    if (!dataset.global()) continue;
    std::vector<Block> blocks(declared.size());
    for (std::size_t axis = 0; axis < dataset.block.global_shape.size(); ++axis) {
      const std::vector<long> offsets = agreement.everyone(dataset.block.offset[axis]);
      const std::vector<long> extents = agreement.everyone(dataset.type.shape[axis]);
      for (std::size_t rank = 0; rank < blocks.size(); ++rank) {
        blocks[rank].offset.push_back(offsets[rank]);
        blocks[rank].shape.push_back(extents[rank]);
      }
    }
    if (std::string problem = cover_problem(dataset.block.global_shape, blocks); !problem.empty()) {
      std::string shape;
      for (const std::int64_t extent : dataset.block.global_shape) {
        shape += (shape.empty() ? "" : "x") + std::to_string(extent);
      }
      return "dataset '" + dataset.name + "' (global shape " + shape + "): " + problem;
    }
  }
  return "";
}

}  // namespace resurgo::autockpt
