// The datasets an application declared to the automatic runtime. A dataset
// with a halo is two parts, interior and ring, each with its own
// ever-written flag (Algorithm 1's ever_written), so that a ring rewritten
// by a halo update before it is read need not be saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "auto/fnv.h"
#include "auto/halo_ring.h"
#include "resurgo/auto.hpp"

namespace resurgo::autockpt {

inline constexpr int kInteriorPart = 0;  // the whole dataset when it has no halo
inline constexpr int kRingPart = 1;

struct Dataset {
  std::string name;
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  ElementType type;
  int halo = 0;
  GlobalBlock block;  // empty: the rank's own array, else its block of a global array
  std::optional<HaloRing> ring;
  bool ever_written[2] = {false, false};

  bool global() const { return !block.global_shape.empty(); }

  int parts() const { return ring ? 2 : 1; }
  std::uint64_t part_bytes(int part) const {
    if (!ring) return bytes;
    return part == kRingPart ? ring->bytes() : bytes - ring->bytes();
  }
  std::size_t element_bytes() const;
};

inline bool reads(Access access) { return access != Access::kWrite; }
inline bool writes(Access access) { return access != Access::kRead; }

// What one loop does to one part of a dataset, all its arguments together.
struct PartAccess {
  int dataset = 0;
  int part = 0;
  bool read = false;
  bool written = false;
};

class DatasetTable {
 public:
  // Validates the name (a region label, not a reserved one, not declared
  // yet), the pointer, the shape a halo needs, and that a block of a global
  // array (non-empty `block`) has no halo, a dtype and a shape of one entry
  // per axis lying inside the global array (its bytes are the Store's to
  // check at protect).
  int add(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo,
          const GlobalBlock& block = {});
  Dataset& operator[](int id) { return datasets_[static_cast<std::size_t>(id)]; }
  const Dataset& operator[](int id) const { return datasets_[static_cast<std::size_t>(id)]; }
  std::size_t size() const { return datasets_.size(); }
  // The id of `name`, or -1.
  int find(std::string_view name) const;

  // The parts a loop's arguments touch, merged per part (a part read by one
  // argument and written by another is read). Throws InvalidArgumentError
  // naming the loop for an unknown dataset or a halo range on a dataset
  // without a halo.
  void accesses(std::span<const Arg> args, std::string_view loop, std::uint64_t loop_index,
                std::vector<PartAccess>& out) const;
  // Marks the written parts as ever written.
  void mark_written(std::span<const PartAccess> accesses);
  // initphase_done: what the initialisation wrote counts as never written.
  void forget_writes();
  std::uint64_t ever_written_bytes() const;
  // Whether every dataset is a block of a global array (and there is one):
  // the checkpoints then restart on another rank count.
  bool all_global() const;
  bool any_global() const;

  // What every rank of a job declares alike, one text per dataset in order:
  // the name, element type, number of dimensions, halo depth and, for a
  // block of a global array, the global shape (the sizes and offsets may
  // differ: each rank holds its own block). The ranks compare their
  // hash at each agreement, and the texts when the hashes differ.
  std::vector<std::string> declarations() const;
  std::uint64_t declarations_hash() const { return declarations_hash_; }

 private:
  std::vector<Dataset> datasets_;
  std::uint64_t declarations_hash_ = kFnvOffset;
};

}  // namespace resurgo::autockpt
