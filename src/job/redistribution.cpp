#include "job/redistribution.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "format/file_names.h"
#include "format/container.h"
#include "format/element_size.h"
#include "resurgo/errors.hpp"
#include "tier/directory_level.h"

namespace resurgo {

namespace {

std::uint64_t linear_index(const std::vector<std::int64_t>& index, const std::vector<std::int64_t>& shape) {
  std::uint64_t linear = 0;
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    linear = linear * static_cast<std::uint64_t>(shape[axis]) + static_cast<std::uint64_t>(index[axis]);
  }
  return linear;
}

const format::ManifestRegion* find_region(const format::Manifest& manifest, int rank, const std::string& label) {
  for (const format::ManifestRegion& region : manifest.regions) {
    if (region.rank == rank && region.label == label) return &region;
  }
  return nullptr;
}

// One old rank's file of the version, opened once, with the last chunk it
// decoded (consecutive runs usually fall in the same chunk).
class OldFile {
 public:
  OldFile(DirectoryLevel& directory, const std::string& name, const format::ManifestFile& expected)
      : file_(directory.open_file(name)) {
    const std::string& path = file_->path();
    container_ = format::read_container(*file_);
    if (container_.checksum != expected.checksum || format::is_delta(container_.header)) {
      throw CorruptionError("'" + path + "' is not the file the job manifest names for rank " +
                            std::to_string(expected.rank) +
                            (format::is_delta(container_.header) ? " (it is a delta version)" : " (checksum differs)"));
    }
  }

  // Copies `run` of region `label` into `destination` (the new block).
  void copy(const std::string& label, const BlockRun& run, std::byte* destination, std::uint64_t& bytes_read) {
    const std::uint32_t region = region_index(label);
    std::uint64_t done = 0;
    while (done < run.bytes) {
      const std::uint64_t at = run.from + done;
      const format::ChunkRecord& chunk = chunk_holding(region, at);
      if (&chunk != decoded_chunk_) {
        decoded_.resize(chunk.raw_length);
        format::read_chunk(*file_, container_, chunk, decoded_.data(), scratch_);
        bytes_read += chunk.stored_length;
        decoded_chunk_ = &chunk;
      }
      const std::uint64_t inside = at - chunk.offset;
      const std::uint64_t piece = std::min(run.bytes - done, chunk.raw_length - inside);
      std::memcpy(destination + run.to + done, decoded_.data() + inside, piece);
      done += piece;
    }
  }

  const std::vector<std::byte>& metadata() const { return container_.header.metadata; }

 private:
  std::uint32_t region_index(const std::string& label) const {
    const auto& regions = container_.header.regions;
    for (std::size_t index = 0; index < regions.size(); ++index) {
      if (regions[index].label == label) return static_cast<std::uint32_t>(index);
    }
    throw MismatchError("'" + file_->path() + "' holds no region '" + label + "', which its job manifest lists");
  }

  const format::ChunkRecord& chunk_holding(std::uint32_t region, std::uint64_t offset) const {
    for (const format::ChunkRecord& chunk : container_.chunks) {
      if (chunk.region == region && chunk.offset <= offset && offset < chunk.offset + chunk.raw_length) return chunk;
    }
    throw CorruptionError("'" + file_->path() + "' has no chunk holding byte " + std::to_string(offset) +
                          " of region " + std::to_string(region));
  }

  std::unique_ptr<ReadableFile> file_;
  format::Container container_;
  const format::ChunkRecord* decoded_chunk_ = nullptr;
  std::vector<std::byte> decoded_;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::vector<BlockRun> overlap_runs(const std::vector<std::int64_t>& old_offset,
                                   const std::vector<std::int64_t>& old_shape,
                                   const std::vector<std::int64_t>& new_offset,
                                   const std::vector<std::int64_t>& new_shape, std::size_t element) {
  const std::size_t axes = old_shape.size();
  std::vector<std::int64_t> low(axes);
  std::vector<std::int64_t> high(axes);
  for (std::size_t axis = 0; axis < axes; ++axis) {
    low[axis] = std::max(old_offset[axis], new_offset[axis]);
    high[axis] = std::min(old_offset[axis] + old_shape[axis], new_offset[axis] + new_shape[axis]);
    if (low[axis] >= high[axis]) return {};
  }
  // One run per index of the leading axes, along the last axis; the index
  // counts like an odometer over the overlap.
  std::vector<BlockRun> runs;
  std::vector<std::int64_t> index = low;
  std::vector<std::int64_t> in_old(axes);
  std::vector<std::int64_t> in_new(axes);
  const std::uint64_t run_bytes = static_cast<std::uint64_t>(high[axes - 1] - low[axes - 1]) * element;
  for (;;) {
    for (std::size_t axis = 0; axis < axes; ++axis) {
      in_old[axis] = index[axis] - old_offset[axis];
      in_new[axis] = index[axis] - new_offset[axis];
    }
    const BlockRun run{linear_index(in_old, old_shape) * element, linear_index(in_new, new_shape) * element, run_bytes};
    if (!runs.empty() && runs.back().from + runs.back().bytes == run.from && runs.back().to + runs.back().bytes == run.to) {
      runs.back().bytes += run.bytes;
    } else {
      runs.push_back(run);
    }
    std::size_t axis = axes - 1;
    while (axis > 0) {
      --axis;
      if (++index[axis] < high[axis]) break;
      index[axis] = low[axis];
      if (axis == 0) return runs;
    }
    if (axes == 1) return runs;
  }
}

std::string redistribution_problem(const format::Manifest& manifest, const std::vector<Region>& regions) {
  for (const Region& region : regions) {
    if (region.block.global_shape.empty()) {
      return "region '" + region.label + "' is not declared as a block of a global array; a version written by " +
             std::to_string(manifest.ranks) + " ranks restarts on another rank count only when every region is "
             "(protect with a GlobalBlock), else it needs the same rank count";
    }
    for (int rank = 0; rank < manifest.ranks; ++rank) {
      const format::ManifestRegion* old = find_region(manifest, rank, region.label);
      if (old == nullptr) {
        return "rank " + std::to_string(rank) + " of the version has no region '" + region.label + "'";
      }
      if (old->global_shape != region.block.global_shape || old->dtype != region.type.dtype) {
        return "region '" + region.label + "' is a block of another global array (shape or dtype) in the version";
      }
    }
  }
  return "";
}

RedistributionReport redistribute(const format::Manifest& manifest, DirectoryLevel& directory,
                                  const std::vector<Region>& regions) {
  RedistributionReport report;
  std::map<int, std::unique_ptr<OldFile>> files;
  const auto file_of = [&](int rank) -> OldFile& {
    std::unique_ptr<OldFile>& file = files[rank];
    if (!file) {
      const format::ManifestFile& expected = manifest.files[static_cast<std::size_t>(rank)];
      file = std::make_unique<OldFile>(directory, format::container_file_name(manifest.version, rank), expected);
    }
    return *file;
  };
  for (const Region& region : regions) {
    const std::size_t element = format::element_size(region.type.dtype);
    std::uint64_t covered = 0;
    for (int rank = 0; rank < manifest.ranks; ++rank) {
      const format::ManifestRegion& old = *find_region(manifest, rank, region.label);
      const std::vector<BlockRun> runs =
          overlap_runs(old.offset, old.shape, region.block.offset, region.type.shape, element);
      for (const BlockRun& run : runs) {
        file_of(rank).copy(region.label, run, region.data, report.bytes_read);
        covered += run.bytes;
      }
    }
    if (covered != region.bytes) {
      throw MismatchError("region '" + region.label + "': the blocks of the " + std::to_string(manifest.ranks) +
                          " ranks of version " + std::to_string(manifest.version) + " cover " +
                          std::to_string(covered) + " of its " + std::to_string(region.bytes) +
                          " bytes (they overlap or leave a gap)");
    }
    report.bytes_restored += region.bytes;
  }
  report.metadata = file_of(0).metadata();
  return report;
}

}  // namespace resurgo
