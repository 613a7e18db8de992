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

// A delta's chunks are at most kDeltaChunkBytes. A restart of a chain reads
// whole every chunk a newer delta holds in part (its checksum covers all of
// it), so the smaller an older delta's chunks, the fewer bytes a newer one
// makes it read for nothing: 1 MiB slabs written at new places each interval
// otherwise cost a restart of ten deltas every older slab whole.
constexpr std::uint64_t kDeltaChunkBytes = std::uint64_t{256} << 10;

std::vector<EncodedChunk> plan_chunks(const format::Header& header, const std::vector<Extent>& extents,
                                      std::uint64_t chunk_size) {
  if (format::is_delta(header)) chunk_size = std::min(chunk_size, kDeltaChunkBytes);
  std::vector<EncodedChunk> chunks;
  for (const Extent& extent : extents) {
    const std::size_t element_size = format::element_size(header.regions[extent.region].dtype);
    for (std::uint64_t done = 0; done < extent.bytes; done += chunk_size) {
      EncodedChunk chunk;
      chunk.record.region = extent.region;
      chunk.record.offset = extent.offset + done;
      chunk.record.raw_length = std::min(chunk_size, extent.bytes - done);
      chunk.raw = extent.source == nullptr ? nullptr : extent.source + done;  // null: filled when written
      chunk.element_size = element_size;
      chunks.push_back(std::move(chunk));
    }
  }
  return chunks;
}

// A file in memory copies and checksums a chunk in one pass only when the
// chunk fits one run of its memory (AppendsInMemory::longest_run), and so
// does a restore out of it; a longer chunk costs a copy and a checksum pass
// at both ends (bench/results/memory_chunks.md).
std::uint64_t chunk_size_for(const WritableFile& file, const Config::Pipeline& pipeline) {
  const auto* in_memory = dynamic_cast<const format::AppendsInMemory*>(&file);
  return in_memory == nullptr ? pipeline.chunk_size : std::min(pipeline.chunk_size, in_memory->longest_run());
}

// A raw chunk's checksum is left to the writer when it computes it in the
// pass that copies the chunk (ContainerWriter::hashes_while_appending).
void encode(EncodedChunk& chunk, const Config::Pipeline& pipeline, bool hash_raw) {
  format::ChunkRecord& record = chunk.record;
  const format::EncodeParams params{pipeline.compress, pipeline.compress_level, pipeline.shuffle, chunk.element_size};
  chunk.early_abort = params.codec != Codec::kNone && !sample_compresses(params, chunk.raw, record.raw_length);
  const bool compressed =
      !chunk.early_abort && format::encode(params, chunk.raw, record.raw_length, chunk.compressed);
  record.codec = compressed ? pipeline.compress : Codec::kNone;
  const std::byte* stored = compressed ? chunk.compressed.data() : chunk.raw;
  record.stored_length = compressed ? chunk.compressed.size() : record.raw_length;
  record.checksum = compressed || hash_raw ? format::checksum(stored, record.stored_length) : 0;
}

// Chunks encoded together: a window of a few full chunks' worth of bytes,
// encoded in parallel, then written in order, which bounds the memory held
// by compressed chunks; a delta's small blocks then share one window (a
// window per few 4 KiB blocks cost more in wake-ups than the blocks). A pool
// without workers encodes one chunk at a time anyway: its window is one
// chunk, written while its bytes are still in the CPU cache.
std::uint64_t window_bytes(const ThreadPool& pool, std::uint64_t chunk_size) {
  const int chunks = pool.size() == 0 ? 1 : 2 * (pool.size() + 1);
  return static_cast<std::uint64_t>(chunks) * chunk_size;
}

// Fills the chunks [begin, end) of a filled version into `buffers`, one per
// chunk of the window, reused from window to window: a fresh buffer per chunk
// would be fresh pages, which the kernel zeroes, a pass over memory each.
void fill_window(std::vector<EncodedChunk>& chunks, std::size_t begin, std::size_t end, const FillChunk& fill,
                 std::vector<std::vector<std::byte>>& buffers) {
  if (buffers.size() < end - begin) buffers.resize(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    format::ChunkRecord& record = chunks[i].record;
    std::vector<std::byte>& buffer = buffers[i - begin];
    if (buffer.size() < record.raw_length) buffer.resize(record.raw_length);
    fill(record.region, record.offset, record.raw_length, buffer.data());
    chunks[i].raw = buffer.data();
  }
}

// Encodes and writes `chunks` in order; those without bytes (raw null)
// are filled by `fill` first, window by window.
std::uint64_t write_chunks(WritableFile& file, const format::Header& header, std::vector<EncodedChunk>& chunks,
                           const Config::Pipeline& pipeline, ThreadPool& pool, const FillChunk& fill,
                           WriteResult* result) {
  std::uint64_t early_aborts = 0;
  format::ContainerWriter writer(file, header);
  const bool hash_raw = !writer.hashes_while_appending();
  const std::uint64_t window = window_bytes(pool, pipeline.chunk_size);
  std::vector<std::vector<std::byte>> filled;
  // Raw chunks that the writer checksums as it appends them leave encode()
  // no bytes to read: no worker is woken for them. Compression is slower
  // than the threshold's copies: always shared.
  const auto work = [&](std::uint64_t bytes) {
    if (pipeline.compress != Codec::kNone) return ThreadPool::kAlwaysShared;
    return hash_raw ? bytes : 0;
  };
  for (std::size_t begin = 0; begin < chunks.size();) {
    std::size_t end = begin;
    std::uint64_t bytes = 0;
    for (; end < chunks.size() && bytes < window; ++end) bytes += chunks[end].record.raw_length;
    if (fill) fill_window(chunks, begin, end, fill, filled);
    pool.parallel_for(end - begin, work(bytes),
                      [&](std::size_t i) { encode(chunks[begin + i], pipeline, hash_raw); });
    for (std::size_t i = begin; i < end; ++i) {
      EncodedChunk& chunk = chunks[i];
      if (chunk.record.codec == Codec::kNone && !hash_raw) {
        writer.add_raw_chunk(chunk.record, chunk.raw);
      } else {
        writer.add_chunk(chunk.record, chunk.record.codec == Codec::kNone ? chunk.raw : chunk.compressed.data());
      }
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

// One extent per region of a full version, each from sources[r] (null for
// a version filled chunk by chunk).
std::vector<Extent> whole_regions(const format::Header& header, const std::vector<const std::byte*>& sources) {
  std::vector<Extent> extents;
  for (std::uint32_t r = 0; r < header.regions.size(); ++r) {
    if (header.regions[r].bytes > 0) extents.push_back({r, 0, header.regions[r].bytes, sources[r]});
  }
  return extents;
}

}  // namespace

std::uint64_t write_extents(WritableFile& file, const format::Header& header, const std::vector<Extent>& extents,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result) {
  std::vector<EncodedChunk> chunks = plan_chunks(header, extents, chunk_size_for(file, pipeline));
  return write_chunks(file, header, chunks, pipeline, pool, nullptr, result);
}

std::uint64_t write_version(WritableFile& file, const format::Header& header, const std::vector<const std::byte*>& sources,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result) {
  return write_extents(file, header, whole_regions(header, sources), pipeline, pool, result);
}

std::uint64_t write_version(WritableFile& file, const format::Header& header, const FillChunk& fill,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result) {
  const std::vector<const std::byte*> unfilled(header.regions.size(), nullptr);
  std::vector<EncodedChunk> chunks = plan_chunks(header, whole_regions(header, unfilled), chunk_size_for(file, pipeline));
  return write_chunks(file, header, chunks, pipeline, pool, fill, result);
}

}  // namespace resurgo
