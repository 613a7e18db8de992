// The stretches of a global-layout file (global_file.h) one rank writes or
// reads, moved a chunk of a few MiB at a time: each chunk is brought into
// file order (or taken out of it), summed for the part checksums
// (part_checksums.h) and written (or read) while it is still in cache, so
// that the steps after the first read it from cache rather than memory,
// and no buffer the size of the rank's part is touched for the first time
// (on a virtual machine each first touch costs more than a copy).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "matrix/part_checksums.h"
#include "matrix/scratch_buffer.h"

namespace resurgo {

inline constexpr std::uint64_t kChunkBytes = std::uint64_t{2} << 20;

// File elements [first, first + count), in memory either in file order at
// `in_place` or through the copies, which get chunk-aligned offsets into
// the piece.
template <typename T>
struct Piece {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  std::uint64_t chunk = kChunkBytes / sizeof(T);  // elements moved at a time
  T* in_place = nullptr;
  std::function<void(std::uint64_t at, std::uint64_t n, T* out)> copy_out{};      // writing: [at, at + n) into out
  std::function<void(std::uint64_t at, std::uint64_t n, const T* in)> copy_in{};  // reading: in into [at, at + n)
};

// A buffer for the largest chunk of the pieces that are not in place.
template <typename T>
ScratchBuffer<T> chunk_buffer(const std::vector<Piece<T>>& pieces) {
  std::uint64_t largest = 0;
  for (const Piece<T>& piece : pieces) {
    if (piece.in_place == nullptr) largest = std::max(largest, std::min(piece.chunk, piece.count));
  }
  return ScratchBuffer<T>(largest);
}

// Writes the pieces: io(file element index, elements, count) per chunk,
// every chunk even after a failed write (the slab exchange must see them
// all: matrix_io.cpp); the part checksums' terms go into `sums` (parts of
// part_elements).
template <typename T>
void write_pieces(const std::vector<Piece<T>>& pieces, std::uint64_t part_elements, std::vector<std::uint64_t>& sums,
                  const std::function<void(std::uint64_t, const T*, std::uint64_t)>& io) {
  ScratchBuffer<T> buffer = chunk_buffer(pieces);
  for (const Piece<T>& piece : pieces) {
    for (std::uint64_t at = 0; at < piece.count; at += piece.chunk) {
      const std::uint64_t n = std::min(piece.chunk, piece.count - at);
      T* chunk = piece.in_place != nullptr ? piece.in_place + at : buffer.data();
      if (piece.in_place == nullptr) piece.copy_out(at, n, chunk);
      add_part_sums(chunk, piece.first + at, n, part_elements, sums);
      io(piece.first + at, chunk, n);
    }
  }
}

// The inverse: io(file element index, elements, count) reads each chunk,
// which is summed and put in place; every chunk, even after a failed read
// (the slab exchange must see them all: matrix_io.cpp).
template <typename T>
void read_pieces(const std::vector<Piece<T>>& pieces, std::uint64_t part_elements, std::vector<std::uint64_t>& sums,
                 const std::function<void(std::uint64_t, T*, std::uint64_t)>& io) {
  ScratchBuffer<T> buffer = chunk_buffer(pieces);
  for (const Piece<T>& piece : pieces) {
    for (std::uint64_t at = 0; at < piece.count; at += piece.chunk) {
      const std::uint64_t n = std::min(piece.chunk, piece.count - at);
      T* chunk = piece.in_place != nullptr ? piece.in_place + at : buffer.data();
      io(piece.first + at, chunk, n);
      add_part_sums(chunk, piece.first + at, n, part_elements, sums);
      if (piece.in_place == nullptr) piece.copy_in(at, n, chunk);
    }
  }
}

}  // namespace resurgo
