#include "core/registry.h"

#include <algorithm>

#include "core/names.h"
#include "format/container.h"

namespace resurgo {

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

}  // namespace resurgo
