#include "capture/device_memory_level.h"

#include <algorithm>
#include <optional>
#include <string>

#include "format/container.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

namespace resurgo {

void pin_memory_level(MemoryLevel& level, std::shared_ptr<gpu::HostPinner> pinner, const Logger& log) {
  MemoryLevel::PiecePinner hook;
  hook.pin = [pinner, &log](void* data, std::size_t bytes) {
    try {
      pinner->pin(data, bytes);
      return true;
    } catch (const gpu::GpuError& error) {
      log.warn(std::string("the L1 memory level stays pageable from here on (restores of device regions from it "
                           "run slower, synchronously): ") +
               error.what());
      return false;
    }
  };
  hook.unpin = [pinner](void* data, std::size_t bytes) { pinner->unpin(data, bytes); };
  level.pin_pieces(std::move(hook));
}

namespace {

// The copies of `region` (entry `index` of the container), in region order,
// when its chunks are uncompressed, tile it, and pass their checks.
std::optional<std::vector<format::ChunkRecord>> verified_chunks(const MemoryLevel::Reader& reader,
                                                                const format::Container& container,
                                                                std::uint32_t index) {
  std::vector<format::ChunkRecord> chunks;
  for (const format::ChunkRecord& chunk : container.chunks) {
    if (chunk.region == index) chunks.push_back(chunk);
  }
  std::sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  std::uint64_t covered = 0;
  for (const format::ChunkRecord& chunk : chunks) {
    if (chunk.codec != Codec::kNone || chunk.offset != covered) return std::nullopt;
    format::check_chunk_record(reader, container, chunk);
    if (reader.checksum(chunk.file_offset, chunk.stored_length) != chunk.checksum) return std::nullopt;
    covered += chunk.raw_length;
  }
  if (covered != container.header.regions[index].bytes) return std::nullopt;
  return chunks;
}

}  // namespace

std::unique_ptr<InPlaceDeviceCopy> InPlaceDeviceCopy::open(MemoryLevel& level, int version,
                                                           const std::vector<Region>& regions) {
  std::unique_ptr<MemoryLevel::Reader> reader = level.open_in_place(version);
  if (!reader) return nullptr;
  std::vector<Copy> copies;
  try {
    const format::Container container = format::read_container(*reader);
    if (container.header.version != version) return nullptr;
    const auto& entries = container.header.regions;
    for (const Region& region : regions) {
      if (region.kind == MemoryKind::kHost) continue;
      const auto entry = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.label == region.label; });
      if (entry == entries.end() || entry->bytes != region.bytes) return nullptr;
      const auto chunks = verified_chunks(*reader, container, static_cast<std::uint32_t>(entry - entries.begin()));
      if (!chunks) return nullptr;
      for (const format::ChunkRecord& chunk : *chunks) {
        copies.push_back(
            {region.label, static_cast<std::byte*>(region.data) + chunk.offset, chunk.file_offset, chunk.raw_length});
      }
    }
  } catch (const Error&) {
    return nullptr;  // damage: the restore reads the version elsewhere and says why
  }
  return std::unique_ptr<InPlaceDeviceCopy>(new InPlaceDeviceCopy(version, std::move(reader), std::move(copies)));
}

std::uint64_t InPlaceDeviceCopy::write_back(gpu::DeviceAccess& access) const {
  std::uint64_t total = 0;
  const Copy* current = nullptr;
  try {
    for (const Copy& copy : copies_) {
      current = &copy;
      std::byte* target = copy.device;
      reader_->for_each_span(copy.file_offset, copy.bytes, [&](const std::byte* data, std::uint64_t bytes) {
        access.to_device_async(target, data, bytes);
        target += bytes;
      });
      total += copy.bytes;
    }
    current = nullptr;
    access.wait_to_device();
  } catch (const gpu::GpuError& error) {
    // The copies queued so far read the pieces: they end before the reader
    // may let the pieces go. Their own failure adds nothing to this one.
    if (current != nullptr) {
      try {
        access.wait_to_device();
      } catch (const gpu::GpuError&) {
      }
    }
    throw gpu::GpuError("copying version " + std::to_string(version_) + "'s " +
                            (current ? "device region '" + current->label + "'" : std::string("device regions")) +
                            " from the L1 memory level: " + error.what() +
                            " (the device regions may have been partly overwritten; restart again)",
                        error.result());
  }
  return total;
}

}  // namespace resurgo
