// Template part of container.h: verification with a caller-chosen callback.
#pragma once

#include <vector>

namespace resurgo::format {

template <class Progress>
void verify_chunks(const ReadableFile& file, const Container& container, Progress&& progress) {
  std::uint64_t total = 0;
  for (const ChunkRecord& chunk : container.chunks) total += chunk.raw_length;
  std::vector<std::byte> raw;
  std::vector<std::byte> scratch;
  std::uint64_t done = 0;
  for (const ChunkRecord& chunk : container.chunks) {
    check_chunk_record(file, container, chunk);
    raw.resize(chunk.raw_length);
    read_chunk(file, container, chunk, raw.data(), scratch);
    done += chunk.raw_length;
    progress(done, total);
  }
}

}  // namespace resurgo::format
