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
    const std::byte* stored = read_stored(file, container, chunk, scratch);
    if (chunk.codec != Codec::kNone) {
      // Only once the checksum passed and the codec's own framing agreed
      // with raw_length (read_container bounded it by the stored length
      // times the codec's ratio) is a buffer sized by it.
      raw.resize(chunk.raw_length);
      decode_stored(file, container, chunk, stored, raw.data());
    }
    done += chunk.raw_length;
    progress(done, total);
  }
}

}  // namespace resurgo::format
