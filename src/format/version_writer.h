// Turns one captured version into a container file: splits its extents into
// chunks, checksums (and compresses) them on the pipeline threads, and
// writes them in order.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "format/extent.h"
#include "format/container.h"
#include "base/thread_pool.h"
#include "resurgo/config.hpp"

namespace resurgo {

struct WriteResult {
  std::uint64_t file_bytes = 0;  // size of the container file
  std::uint64_t chunks = 0;
  // Chunks stored raw because a sample of them did not compress
  // (format/compress_probe.h), so they were never compressed whole.
  std::uint64_t chunks_raw_early_abort = 0;
};

// Writes `extents` (ascending and disjoint within each region; covering
// every region whole unless header.base_version marks a delta), each split
// into chunks of at most pipeline.chunk_size (and of at most the longest
// run of a file in memory: format::AppendsInMemory). Returns the file's size; fills
// `result` too when given.
std::uint64_t write_extents(WritableFile& file, const format::Header& header, const std::vector<Extent>& extents,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result = nullptr);

// A full version: sources[i] holds header.regions[i].bytes bytes.
std::uint64_t write_version(WritableFile& file, const format::Header& header, const std::vector<const std::byte*>& sources,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result = nullptr);

// Puts the `bytes` bytes of region `region` from `offset` into `destination`.
using FillChunk =
    std::function<void(std::uint32_t region, std::uint64_t offset, std::uint64_t bytes, std::byte* destination)>;

// A full version whose bytes no buffer holds whole (a compacted chain's):
// `fill` produces each chunk just before it is checksummed, compressed and
// written, so that its bytes are still in the CPU cache then. It is called
// on the calling thread, once per chunk, in file order: regions in order,
// ascending offsets. The writer holds one window of chunks at a time (one
// chunk with a pool without workers), never the whole version.
std::uint64_t write_version(WritableFile& file, const format::Header& header, const FillChunk& fill,
                            const Config::Pipeline& pipeline, ThreadPool& pool, WriteResult* result = nullptr);

}  // namespace resurgo
