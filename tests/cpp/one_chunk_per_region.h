// A container file as the store's writer (format::ContainerWriter) writes
// it, for tests of what the readers make of its header: every region of
// `header` one chunk of `region_bytes` bytes of `fill`.
#pragma once

#include <cstdint>
#include <vector>

#include "format/container.h"
#include "io/bytes_file.h"

namespace resurgo {

inline std::vector<std::byte> one_chunk_per_region(const format::Header& header, std::uint64_t region_bytes,
                                                   std::byte fill) {
  BytesFile file("one chunk per region");
  format::ContainerWriter writer(file, header);
  const std::vector<std::byte> data(region_bytes, fill);
  for (std::uint32_t region = 0; region < header.regions.size(); ++region) {
    format::ChunkRecord record;
    record.region = region;
    record.raw_length = region_bytes;
    record.stored_length = region_bytes;
    record.checksum = format::checksum(data.data(), region_bytes);
    writer.add_chunk(record, data.data());
  }
  writer.finish();
  return file.take();
}

}  // namespace resurgo
