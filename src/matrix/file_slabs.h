// The data of a global-layout file (global_file.h) cut into one contiguous
// slab per rank, so that each rank reads or writes one large range of the
// file with one call, as a plain file is written, instead of MPI-IO's
// collective calls over the block-cyclic pieces.
// Slab r holds the file's elements [first(r), first(r + 1)): whole parts of
// the file (part_checksums.h), dealt evenly, so each part's checksum is
// one rank's sum over contiguous memory.
//
// Between the owners' local arrays and the slabs the elements travel in
// file order: each owner sends its elements in file order, and the slab's
// holder walks its slab in runs (a stretch of one line inside one block,
// hence of one owner) and takes each run from that owner's next elements.
// Pure arithmetic on the layout, so both sides agree by construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "matrix/block_cyclic.h"
#include "resurgo/matrix.hpp"

namespace resurgo {

class FileSlabs {
 public:
  FileSlabs(const BlockCyclic& layout, int ranks, MatrixOrder order, std::uint64_t part_elements)
      : layout_(layout), ranks_(ranks), row_major_(order == MatrixOrder::kRowMajor) {
    const auto& shape = layout.layout();
    total_ = static_cast<std::uint64_t>(shape.rows) * static_cast<std::uint64_t>(shape.cols);
    parts_ = (total_ + part_elements - 1) / part_elements;
    part_elements_ = part_elements;
    line_axis_ = row_major_ ? layout.rows() : layout.cols();
    inner_axis_ = row_major_ ? layout.cols() : layout.rows();
  }

  std::uint64_t first(int rank) const {
    return std::min(total_, parts_ * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(ranks_) *
                                part_elements_);
  }
  std::uint64_t elements(int rank) const { return first(rank + 1) - first(rank); }

  // Calls visit(offset in the slab, owner, length) for the runs of `rank`'s
  // slab between slab offsets [from, to), in file order.
  template <typename Visit>
  void for_each_run(int rank, std::uint64_t from, std::uint64_t to, Visit&& visit) const {
    const auto inner = static_cast<std::uint64_t>(inner_axis_.extent);
    const auto block = static_cast<std::uint64_t>(std::min(inner_axis_.block, inner_axis_.extent));
    const std::uint64_t begin = first(rank);
    const std::uint64_t end = begin + to;
    for (std::uint64_t at = begin + from; at < end;) {
      const std::uint64_t line = at / inner;
      const std::uint64_t place = at % inner;
      const std::uint64_t length = std::min({block - place % block, inner - place, end - at});
      visit(at - begin, owner(line, place), length);
      at += length;
    }
  }

  // How many of each owner's elements `rank`'s slab holds.
  std::vector<std::uint64_t> counts_from_owners(int rank) const {
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(ranks_), 0);
    for_each_run(rank, 0, elements(rank),
                 [&](std::uint64_t, int from, std::uint64_t length) { counts[from] += length; });
    return counts;
  }

  // Slab offsets [from, to) of `rank`'s slab into `out` from the owners'
  // elements: owner o's next ones at packed + next[o], in file order
  // (advanced past those taken, so that consecutive ranges continue).
  template <typename T>
  void unpack(int rank, std::uint64_t from, std::uint64_t to, const T* packed, std::vector<std::uint64_t>& next,
              T* out) const {
    for_each_run(rank, from, to, [&](std::uint64_t offset, int owner, std::uint64_t length) {
      std::memcpy(out + (offset - from), packed + next[owner], length * sizeof(T));
      next[owner] += length;
    });
  }
  // The inverse: the slab's elements [from, to), at `in`, into each
  // owner's stretch of `packed`.
  template <typename T>
  void pack(int rank, std::uint64_t from, std::uint64_t to, const T* in, std::vector<std::uint64_t>& next,
            T* packed) const {
    for_each_run(rank, from, to, [&](std::uint64_t offset, int owner, std::uint64_t length) {
      std::memcpy(packed + next[owner], in + (offset - from), length * sizeof(T));
      next[owner] += length;
    });
  }

 private:
  int owner(std::uint64_t line, std::uint64_t place) const {
    const int line_process = line_axis_.owner(static_cast<std::int64_t>(line));
    const int inner_process = inner_axis_.owner(static_cast<std::int64_t>(place));
    return row_major_ ? layout_.rank_of(line_process, inner_process) : layout_.rank_of(inner_process, line_process);
  }

  const BlockCyclic& layout_;
  int ranks_;
  bool row_major_;
  std::uint64_t total_ = 0;
  std::uint64_t parts_ = 0;
  std::uint64_t part_elements_ = 1;
  CyclicAxis line_axis_;
  CyclicAxis inner_axis_;
};

}  // namespace resurgo
