// write_container(): container files from given parts, for tests.
#include <memory>

#include "format/container.h"
#include "resurgo/tools.hpp"

namespace resurgo::tools {

void write_container(const std::string& path, const ContainerHeader& header, const std::vector<ChunkBytes>& chunks) {
  format::Header parts;
  parts.store = header.store;
  parts.version = header.version;
  parts.rank = header.rank;
  parts.base_version = header.base_version;
  parts.created_unix_ns = header.created_unix_ns;
  parts.chunk_size = header.chunk_size;
  parts.metadata = header.metadata;
  for (const ContainerRegion& region : header.regions) {
    parts.regions.push_back({region.id, region.label, static_cast<format::RegionKind>(region.kind), region.bytes,
                             region.type.dtype, region.type.shape, region.device.value_or(kRecordedUnknown)});
  }
  const std::unique_ptr<WritableFile> file = Env::posix()->create(path, 0600);
  format::ContainerWriter writer(*file, parts);
  for (const ChunkBytes& chunk : chunks) {
    format::ChunkRecord record;
    record.region = chunk.region;
    record.offset = chunk.offset;
    record.raw_length = chunk.bytes.size();
    record.stored_length = chunk.bytes.size();
    record.checksum = format::checksum(chunk.bytes.data(), chunk.bytes.size());
    writer.add_chunk(record, chunk.bytes.data());
  }
  writer.finish();
  file->sync();
  file->close();
}

}  // namespace resurgo::tools
