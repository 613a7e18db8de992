#include "format/version_writer.h"

#include <algorithm>

#include "base/crash_point.h"
#include "format/codec.h"
#include "format/element_size.h"
#include "format/compress_probe.h"

namespace resurgo {

namespace {

struct EncodedChunk {
  format::ChunkRecord record;
  const std::byte* raw = nullptr;
  std::size_t element_size = 1;       // of the region's dtype: the shuffle's unit
  std::vector<std::byte> compressed;  // used when compression saved space
  bool early_abort = false;           // stored raw: a sample did not compress
};

std::vector<EncodedChunk> plan_chunks(const format::Header& header, const std::vector<Extent>& extents,
                                      std::uint64_t chunk_size) {
  std::vector<EncodedChunk> chunks;
  for (const Extent& extent : extents) {
    const std::size_t element_size = format::element_size(header.regions[extent.region].dtype);
    for (std::uint64_t done = 0; done < extent.bytes; done += chunk_size) {
      EncodedChunk chunk;
      chunk.record.region = extent.region;
      chunk.record.offset = extent.offset + done;
      chunk.record.raw_length = std::min(chunk_size, extent.bytes - done);
      chunk.raw = extent.source + done;
      chunk.element_size = element_size;
      chunks.push_back(std::move(chunk));
    }
  }
  return chunks;
}

void encode(EncodedChunk& chunk, const Config::Pipeline& pipeline) {
  format::ChunkRecord& record = chunk.record;
  const format::EncodeParams params{pipeline.compress, pipeline.compress_level, pipeline.shuffle, chunk.element_size};
  chunk.early_abort = params.codec != Codec::kNone && !sample_compresses(params, chunk.raw, record.raw_length);
  const bool compressed =
      !chunk.early_abort && format::encode(params, chunk.raw, record.raw_length, chunk.compressed);
  record.codec = compressed ? pipeline.compress : Codec::kNone;
  const std::byte* stored = compressed ? chunk.compressed.data() : chunk.raw;
  record.stored_length = compressed ? chunk.compressed.size() : record.raw_length;
  record.checksum = format::checksum(stored, record.stored_length);
}

}  // namespace

std::uint64_t write_extents(WritableFile& file, const format::Header& header, const std::vector<Extent>& extents,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result) {
  std::vector<EncodedChunk> chunks = plan_chunks(header, extents, pipeline.chunk_size);
  std::uint64_t early_aborts = 0;
  format::ContainerWriter writer(file, header);
  // A window of chunks is encoded in parallel, then written in order. The
  // window holds a few full chunks' worth of bytes, which bounds the memory
  // held by compressed chunks; a delta's small blocks then share one window
  // (a window per few 4 KiB blocks cost more in wake-ups than the blocks).
  const std::uint64_t window_bytes = static_cast<std::uint64_t>(std::max(2, 2 * (pool.size() + 1))) * pipeline.chunk_size;
  for (std::size_t begin = 0; begin < chunks.size();) {
    std::size_t end = begin;
    for (std::uint64_t bytes = 0; end < chunks.size() && bytes < window_bytes; ++end) bytes += chunks[end].record.raw_length;
    pool.parallel_for(end - begin, [&](std::size_t i) { encode(chunks[begin + i], pipeline); });
    for (std::size_t i = begin; i < end; ++i) {
      EncodedChunk& chunk = chunks[i];
      writer.add_chunk(chunk.record, chunk.record.codec == Codec::kNone ? chunk.raw : chunk.compressed.data());
      std::vector<std::byte>().swap(chunk.compressed);
      early_aborts += chunk.early_abort ? 1 : 0;
      RESURGO_CRASH_POINT("write.chunk", 0);
    }
    begin = end;
  }
  writer.finish();
  if (result != nullptr) *result = WriteResult{writer.bytes_written(), chunks.size(), early_aborts};
  return writer.bytes_written();
}

std::uint64_t write_version(WritableFile& file, const format::Header& header, const std::vector<const std::byte*>& sources,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result) {
  std::vector<Extent> extents;
  for (std::uint32_t r = 0; r < header.regions.size(); ++r) {
    if (header.regions[r].bytes > 0) extents.push_back({r, 0, header.regions[r].bytes, sources[r]});
  }
  return write_extents(file, header, extents, pipeline, pool, result);
}

}  // namespace resurgo
