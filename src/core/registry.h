// The protected regions of a store, in the order they were protected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/container.h"
#include "resurgo/resurgo.hpp"

namespace resurgo {

struct Region {
  int id = 0;
  std::string label;
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  ElementType type;
  GlobalBlock block;  // empty unless a block of a global array
  MemoryKind kind = MemoryKind::kHost;
  // Restart leaves the region's bytes to its caller, which copies them from
  // elsewhere (device regions still in the L0 device cache); the version's
  // region table must still hold it.
  bool restored_elsewhere = false;
};

class Registry {
 public:
  // Validates pointer, size, label and uniqueness of id and label.
  void add(Region region);
  void remove(int id);
  const std::vector<Region>& regions() const { return regions_; }
  bool empty() const { return regions_.empty(); }
  std::uint64_t total_bytes() const;
  // Bytes of the host regions: those the host capture takes (device and
  // managed ones are taken by the driver's copies, capture/device_regions.h).
  std::uint64_t host_bytes() const;
  // Whether there are device or managed regions.
  bool has_device_regions() const;

 private:
  std::vector<Region> regions_;
};

// The header of `version` of store `store` (identity `store_id`), rank
// `rank`, holding the regions of `registry` and the application's
// `metadata`.
format::Header version_header(const Registry& registry, const std::string& store, const format::StoreId& store_id,
                              int version, int rank, std::uint64_t chunk_size, const std::vector<std::byte>& metadata);

}  // namespace resurgo
