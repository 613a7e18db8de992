#include "core/registry.h"

#include <chrono>

#include <algorithm>

#include "base/names.h"
#include "format/container.h"
#include "format/element_size.h"

namespace resurgo {

namespace {

// A block of a global array must say where it lies and tile its bytes
// exactly: restart on another rank count computes byte offsets from it.
void check_block(const Region& region) {
  const GlobalBlock& block = region.block;
  if (block.global_shape.empty() && block.offset.empty()) return;
  const auto refuse = [&](const std::string& why) {
    throw InvalidArgumentError("cannot protect region '" + region.label + "' as a block of a global array: " + why);
  };
  const std::size_t axes = block.global_shape.size();
  if (axes == 0 || block.offset.size() != axes || region.type.shape.size() != axes) {
    refuse("the global shape, the offset and the block's own shape need one entry per axis; got " +
           std::to_string(axes) + ", " + std::to_string(block.offset.size()) + " and " +
           std::to_string(region.type.shape.size()));
  }
  if (axes > format::kMaxShapeRank) refuse("more than " + std::to_string(format::kMaxShapeRank) + " axes");
  std::uint64_t elements = 1;
  for (std::size_t axis = 0; axis < axes; ++axis) {
    const std::int64_t offset = block.offset[axis];
    const std::int64_t extent = region.type.shape[axis];
    if (offset < 0 || extent < 0 || block.global_shape[axis] < 0 || offset + extent > block.global_shape[axis]) {
      refuse("on axis " + std::to_string(axis) + " the block [" + std::to_string(offset) + ", " +
             std::to_string(offset + extent) + ") does not lie inside [0, " + std::to_string(block.global_shape[axis]) +
             ")");
    }
    elements *= static_cast<std::uint64_t>(extent);
  }
  const std::size_t element = format::element_size(region.type.dtype);
  if (region.type.dtype.empty() || elements * element != region.bytes) {
    refuse("its dtype '" + region.type.dtype + "' and shape give " + std::to_string(elements * element) +
           " bytes, the region has " + std::to_string(region.bytes) + " (give the block's dtype and shape)");
  }
}

}  // namespace

void Registry::add(Region region) {
  if (region.label.empty()) region.label = "region-" + std::to_string(region.id);
  validate_label(region.label);
  if (region.data == nullptr) {
    throw InvalidArgumentError("cannot protect region '" + region.label + "': the pointer is null");
  }
  if (region.bytes == 0) {
    throw InvalidArgumentError("cannot protect region '" + region.label + "': its size is zero bytes");
  }
  if (region.type.shape.size() > format::kMaxShapeRank || region.type.dtype.size() > format::kMaxDtypeBytes) {
    throw InvalidArgumentError("cannot protect region '" + region.label + "': a shape of rank at most " +
                               std::to_string(format::kMaxShapeRank) + " and a dtype name of at most " +
                               std::to_string(format::kMaxDtypeBytes) + " bytes are supported");
  }
  check_block(region);
  for (const Region& other : regions_) {
    if (other.id == region.id) {
      throw InvalidArgumentError("cannot protect region '" + region.label + "': id " + std::to_string(region.id) +
                                 " is already used by region '" + other.label + "'; unprotect it first");
    }
    if (other.label == region.label) {
      throw InvalidArgumentError("cannot protect region id " + std::to_string(region.id) + ": label '" +
                                 region.label + "' is already used by region id " + std::to_string(other.id));
    }
  }
  regions_.push_back(std::move(region));
}

void Registry::remove(int id) {
  const auto it = std::find_if(regions_.begin(), regions_.end(), [&](const Region& r) { return r.id == id; });
  if (it == regions_.end()) throw NotFoundError("cannot unprotect region id " + std::to_string(id) + ": it is not protected");
  regions_.erase(it);
}

std::uint64_t Registry::total_bytes() const {
  std::uint64_t total = 0;
  for (const Region& region : regions_) total += region.bytes;
  return total;
}

std::uint64_t Registry::host_bytes() const {
  std::uint64_t total = 0;
  for (const Region& region : regions_) total += region.kind == MemoryKind::kHost ? region.bytes : 0;
  return total;
}

bool Registry::has_device_regions() const {
  return std::any_of(regions_.begin(), regions_.end(),
                     [](const Region& region) { return region.kind != MemoryKind::kHost; });
}

format::Header version_header(const Registry& registry, const std::string& store, const format::StoreId& store_id,
                              int version, int rank, std::uint64_t chunk_size, const std::vector<std::byte>& metadata) {
  format::Header header;
  header.store = store;
  header.store_id = store_id;
  header.version = version;
  header.rank = static_cast<std::uint32_t>(rank);
  header.created_unix_ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                          std::chrono::system_clock::now().time_since_epoch())
                                                          .count());
  header.chunk_size = chunk_size;
  for (const Region& region : registry.regions()) {
    header.regions.push_back({region.id, region.label, static_cast<format::RegionKind>(region.kind), region.bytes,
                              region.type.dtype, region.type.shape});
  }
  header.metadata = metadata;
  return header;
}

}  // namespace resurgo
