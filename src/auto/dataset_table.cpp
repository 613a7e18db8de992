#include "auto/dataset_table.h"

#include <algorithm>
#include <string>

#include "auto/checkpoint_record.h"
#include "base/names.h"
#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

std::string in_loop(std::string_view loop, std::uint64_t loop_index) {
  return "loop " + std::to_string(loop_index) + " '" + std::string(loop) + "'";
}

std::string extents(const std::vector<std::int64_t>& values) {
  std::string text;
  for (const std::int64_t value : values) text += (text.empty() ? "" : "x") + std::to_string(value);
  return text;
}

std::string declaration(const Dataset& dataset) {
  return "'" + dataset.name + "' (" + (dataset.type.dtype.empty() ? "bytes" : dataset.type.dtype) + ", " +
         std::to_string(dataset.type.shape.size()) + "-D, halo " + std::to_string(dataset.halo) +
         (dataset.global() ? ", block of a global " + extents(dataset.block.global_shape) : "") + ")";
}

// Restart on another rank count maps blocks of the global array, which a
// halo ring (the neighbours' cells) is not part of.
void check_block(const std::string& name, const ElementType& type, int halo, const GlobalBlock& block) {
  if (block.global_shape.empty() && block.offset.empty()) return;
  const auto refuse = [&](const std::string& why) {
    throw InvalidArgumentError("dataset '" + name + "' as a block of a global array: " + why);
  };
  if (halo > 0) {
    refuse("a dataset with a halo cannot be one (its ring holds other ranks' cells); declare it with halo 0, "
           "its block without the ring");
  }
  const std::size_t axes = block.global_shape.size();
  if (type.dtype.empty() || axes == 0 || block.offset.size() != axes || type.shape.size() != axes) {
    refuse("it needs a dtype, and the global shape, the offset and the block's shape with one entry per axis; got "
           "dtype '" + type.dtype + "' and " + std::to_string(axes) + ", " + std::to_string(block.offset.size()) +
           " and " + std::to_string(type.shape.size()) + " entries");
  }
  for (std::size_t axis = 0; axis < axes; ++axis) {
    const std::int64_t offset = block.offset[axis];
    if (offset < 0 || type.shape[axis] < 0 || offset + type.shape[axis] > block.global_shape[axis]) {
      refuse("on axis " + std::to_string(axis) + " the block [" + std::to_string(offset) + ", " +
             std::to_string(offset + type.shape[axis]) + ") does not lie inside [0, " +
             std::to_string(block.global_shape[axis]) + ")");
    }
  }
}

// `text` and a separator, continuing `hash`.
std::uint64_t mix(std::uint64_t hash, const std::string& text) { return fnv(fnv(hash, text), "\n"); }

}  // namespace

std::size_t Dataset::element_bytes() const {
  std::uint64_t elements = 1;
  for (const std::int64_t extent : type.shape) elements *= static_cast<std::uint64_t>(extent);
  return static_cast<std::size_t>(bytes / elements);
}

int DatasetTable::add(const std::string& name, void* data, std::size_t bytes, const ElementType& type, int halo,
                      const GlobalBlock& block) {
  validate_label(name);
  if (name.rfind(kReservedPrefix, 0) == 0 || name.find(kRingSuffix) != std::string::npos) {
    throw InvalidArgumentError("dataset '" + name + "': names starting with '" + kReservedPrefix +
                               "' or containing '" + kRingSuffix + "' are reserved by the runtime");
  }
  if (find(name) >= 0) throw InvalidArgumentError("dataset '" + name + "' is declared already");
  if (data == nullptr || bytes == 0) {
    throw InvalidArgumentError("dataset '" + name + "': the pointer is null or the size is zero");
  }
  if (halo < 0) throw InvalidArgumentError("dataset '" + name + "': the halo depth is negative");
  check_block(name, type, halo, block);
  Dataset dataset{name, static_cast<std::byte*>(data), bytes, type, halo, block, std::nullopt, {false, false}};
  if (halo > 0) {
    std::uint64_t elements = type.shape.empty() ? 0 : 1;
    for (const std::int64_t extent : type.shape) elements *= extent > 0 ? static_cast<std::uint64_t>(extent) : 0;
    if (elements == 0 || bytes % elements != 0) {
      throw InvalidArgumentError("dataset '" + name + "': a halo needs the shape of the array (halo included) whose "
                                 "elements make up its " + std::to_string(bytes) + " bytes");
    }
    dataset.ring.emplace(type.shape, static_cast<std::size_t>(bytes / elements), halo);
  }
  declarations_hash_ = mix(declarations_hash_, declaration(dataset));
  datasets_.push_back(std::move(dataset));
  return static_cast<int>(datasets_.size() - 1);
}

int DatasetTable::find(std::string_view name) const {
  const auto it = std::find_if(datasets_.begin(), datasets_.end(), [&](const Dataset& d) { return d.name == name; });
  return it == datasets_.end() ? -1 : static_cast<int>(it - datasets_.begin());
}

void DatasetTable::accesses(std::span<const Arg> args, std::string_view loop, std::uint64_t loop_index,
                            std::vector<PartAccess>& out) const {
  out.clear();
  for (const Arg& arg : args) {
    if (arg.dataset < 0 || static_cast<std::size_t>(arg.dataset) >= datasets_.size()) {
      throw InvalidArgumentError(in_loop(loop, loop_index) + " declares dataset id " + std::to_string(arg.dataset) +
                                 ", which was not declared; declare it with dataset() first");
    }
    const Dataset& dataset = datasets_[static_cast<std::size_t>(arg.dataset)];
    if (arg.range == Range::kHalo && !dataset.ring) {
      throw InvalidArgumentError(in_loop(loop, loop_index) + " accesses the halo of dataset '" + dataset.name +
                                 "', which was declared without a halo");
    }
    for (int part = 0; part < dataset.parts(); ++part) {
      const bool covered = arg.range == Range::kAll || !dataset.ring ||
                           (arg.range == Range::kInterior ? part == kInteriorPart : part == kRingPart);
      if (!covered) continue;
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const PartAccess& a) { return a.dataset == arg.dataset && a.part == part; });
      if (it == out.end()) it = out.insert(out.end(), PartAccess{arg.dataset, part, false, false});
      it->read = it->read || reads(arg.access);
      it->written = it->written || writes(arg.access);
    }
  }
}

void DatasetTable::mark_written(std::span<const PartAccess> accesses) {
  for (const PartAccess& access : accesses) {
    if (access.written) datasets_[static_cast<std::size_t>(access.dataset)].ever_written[access.part] = true;
  }
}

void DatasetTable::forget_writes() {
  for (Dataset& dataset : datasets_) dataset.ever_written[0] = dataset.ever_written[1] = false;
}

std::vector<std::string> DatasetTable::declarations() const {
  std::vector<std::string> texts;
  for (const Dataset& dataset : datasets_) texts.push_back(declaration(dataset));
  return texts;
}

bool DatasetTable::all_global() const {
  return !datasets_.empty() &&
         std::all_of(datasets_.begin(), datasets_.end(), [](const Dataset& d) { return d.global(); });
}

bool DatasetTable::any_global() const {
  return std::any_of(datasets_.begin(), datasets_.end(), [](const Dataset& d) { return d.global(); });
}

std::uint64_t DatasetTable::ever_written_bytes() const {
  std::uint64_t total = 0;
  for (const Dataset& dataset : datasets_) {
    for (int part = 0; part < dataset.parts(); ++part) {
      if (dataset.ever_written[part]) total += dataset.part_bytes(part);
    }
  }
  return total;
}

}  // namespace resurgo::autockpt
