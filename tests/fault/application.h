// The small application the fault campaigns checkpoint: two regions of odd
// sizes and a metadata string, all derived from the version number, so any
// process can tell whether restored bytes are exactly those of one version.
// Like a simulation that updates part of its state per step, each version
// changes one 4 KiB block in five (a different fifth each time), and
// advance_to writes only the bytes that change: delta captures
// (capture.mode = "delta") then save a fifth of the state, and every block
// still differs between any two versions five apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "resurgo/resurgo.hpp"

namespace resurgo::fault {

class Application {
 public:
  static constexpr std::size_t kDefaultTagBytes = 100 * 1000;

  explicit Application(std::size_t field_values = 160 * 1024, std::size_t tag_bytes = kDefaultTagBytes)
      : field_(field_values), tags_(tag_bytes) {}

  // With device.backend = host, the field is a device region (host memory
  // standing for device memory): it then goes through the L0 device cache.
  void protect(Store& store) {
    const auto field_values = static_cast<std::int64_t>(field_.size());
    const auto tag_bytes = static_cast<std::int64_t>(tags_.size());
    const ElementType field_type{"float64", {field_values}};
    if (store.config().device.backend == DeviceBackend::kHost) {
      store.protect_device(0, field_.data(), field_.size() * sizeof(double), "field", field_type);
    } else {
      store.protect(0, field_.data(), field_.size() * sizeof(double), "field", field_type);
    }
    store.protect(1, tags_.data(), tags_.size(), "tags", {"uint8", {tag_bytes}});
  }

  // Sets every byte of the state to those of `version`, metadata included.
  void advance_to(Store& store, int version) {
    for (std::size_t i = 0; i < field_.size(); ++i) update(field_[i], field_value(version, i));
    for (std::size_t i = 0; i < tags_.size(); ++i) update(tags_[i], tag_value(version, i));
    const std::string text = metadata_of(version);
    store.set_metadata(text.data(), text.size());
  }

  // Empty when the regions and `store`'s metadata hold exactly `version`;
  // otherwise a description of the first difference.
  std::string difference_from(const Store& store, int version) const {
    for (std::size_t i = 0; i < field_.size(); ++i) {
      if (field_[i] != field_value(version, i)) return "field[" + std::to_string(i) + "] differs";
    }
    for (std::size_t i = 0; i < tags_.size(); ++i) {
      if (tags_[i] != tag_value(version, i)) return "tags[" + std::to_string(i) + "] differs";
    }
    const std::vector<std::byte>& metadata = store.metadata();
    const std::string expected = metadata_of(version);
    if (metadata.size() != expected.size() ||
        std::string(reinterpret_cast<const char*>(metadata.data()), metadata.size()) != expected) {
      return "metadata differs";
    }
    return {};
  }

 private:
  static constexpr std::size_t kBlockBytes = 4096;
  static constexpr int kVersionsPerUpdate = 5;

  // The newest version <= `version` that updated block `block`.
  static long updated_at(int version, std::size_t block) {
    const long phase = static_cast<long>((block * 3) % kVersionsPerUpdate);
    return version - ((version + phase) % kVersionsPerUpdate + kVersionsPerUpdate) % kVersionsPerUpdate;
  }
  static double field_value(int version, std::size_t i) {
    return static_cast<double>(updated_at(version, i * sizeof(double) / kBlockBytes)) * 1e7 + static_cast<double>(i);
  }
  static std::uint8_t tag_value(int version, std::size_t i) {
    const auto updated = static_cast<std::size_t>(updated_at(version, i / kBlockBytes) + kVersionsPerUpdate);
    return static_cast<std::uint8_t>((updated * 131u + i * 7u) ^ (i >> 9));
  }
  // Reading does not count as writing for a dirty tracker; a store of the
  // same value would.
  template <class T>
  static void update(T& element, T value) {
    if (element != value) element = value;
  }
  static std::string metadata_of(int version) { return "application state of version " + std::to_string(version); }

  std::vector<double> field_;
  std::vector<std::uint8_t> tags_;
};

}  // namespace resurgo::fault
