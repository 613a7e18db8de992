// Chains of container files written straight through format::ContainerWriter
// (uncompressed chunks), so that the chain tests need no delta capture: a
// full version holds every byte of its regions, a delta only the extents it
// names. ChainModel keeps what restoring each version must give.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "format/extent.h"  // `source` unused: the bytes come from written_byte
#include "format/container.h"
#include "resurgo/env.hpp"

namespace resurgo {

// The byte a version holds at `offset` of `region` where it wrote it.
inline std::byte written_byte(int version, std::uint32_t region, std::uint64_t offset) {
  return static_cast<std::byte>((offset * 131 + offset / 251 + static_cast<std::uint64_t>(version) * 37 + region * 7) &
                                0xff);
}

// Writes `version` (base -1: full, every byte of every region) holding
// `extents` split into chunks of at most `chunk_size` bytes, as the store of
// identity `store_id` would (none: a file no store restarts from unless it
// accepts foreign versions).
inline std::function<void(WritableFile&)> chain_file(const std::string& store, int version, int base,
                                                     const std::vector<format::RegionEntry>& regions,
                                                     std::vector<Extent> extents, std::uint64_t chunk_size,
                                                     const format::StoreId& store_id = {}) {
  if (base < 0) {
    extents.clear();
    for (std::uint32_t r = 0; r < regions.size(); ++r) {
      if (regions[r].bytes > 0) extents.push_back({r, 0, regions[r].bytes});
    }
  }
  return [=](WritableFile& file) {
    format::Header header;
    header.store = store;
    header.store_id = store_id;
    header.version = version;
    header.base_version = base;
    header.chunk_size = chunk_size;
    header.regions = regions;
    const std::string metadata = "version " + std::to_string(version);
    for (char c : metadata) header.metadata.push_back(static_cast<std::byte>(c));
    format::ContainerWriter writer(file, header);
    std::vector<std::byte> bytes;
    for (const Extent& extent : extents) {
      for (std::uint64_t done = 0; done < extent.bytes; done += chunk_size) {
        format::ChunkRecord chunk;
        chunk.region = extent.region;
        chunk.offset = extent.offset + done;
        chunk.raw_length = std::min(chunk_size, extent.bytes - done);
        chunk.stored_length = chunk.raw_length;
        bytes.resize(chunk.raw_length);
        for (std::uint64_t i = 0; i < chunk.raw_length; ++i) {
          bytes[i] = written_byte(version, chunk.region, chunk.offset + i);
        }
        chunk.checksum = format::checksum(bytes.data(), bytes.size());
        writer.add_chunk(chunk, bytes.data());
      }
    }
    writer.finish();
  };
}

// What each version of a chain holds once restored, region by region.
class ChainModel {
 public:
  explicit ChainModel(std::vector<format::RegionEntry> regions) : regions_(std::move(regions)) {}

  const std::vector<format::RegionEntry>& regions() const { return regions_; }

  // Records `version` as written by chain_file with the same arguments.
  void add(int version, int base, const std::vector<Extent>& extents) {
    std::vector<std::vector<std::byte>> state;
    if (base < 0) {
      for (const format::RegionEntry& region : regions_) state.emplace_back(region.bytes);
      for (std::uint32_t r = 0; r < regions_.size(); ++r) fill(state, version, {r, 0, regions_[r].bytes});
    } else {
      state = states_.at(base);
      for (const Extent& extent : extents) fill(state, version, extent);
    }
    states_[version] = std::move(state);
  }

  const std::vector<std::byte>& region(int version, std::uint32_t r) const { return states_.at(version).at(r); }

 private:
  static void fill(std::vector<std::vector<std::byte>>& state, int version, const Extent& extent) {
    for (std::uint64_t i = extent.offset; i < extent.offset + extent.bytes; ++i) {
      state[extent.region][i] = written_byte(version, extent.region, i);
    }
  }

  std::vector<format::RegionEntry> regions_;
  std::map<int, std::vector<std::vector<std::byte>>> states_;
};

}  // namespace resurgo
