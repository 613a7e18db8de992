// L1 memory level: whole versions kept in process memory, in the container
// format (checksummed chunks), so that restore, verification and
// level-to-level copies treat them exactly as files of the directory levels.
// A route keeps versions here with `[memory] every`; adjoint prefetch copies
// versions here from the directory levels (DESIGN.md, "Adjoint staging").
//
// Memory comes in 2 MiB pieces, taken from the system lazily up to
// `capacity` and kept: a version written into touched memory pays no page
// faults (first touch: the gpu-cache-allocation paper, section IV-A,
// measured writes to untouched pages at half the bandwidth of writes to
// touched ones). Versions share pieces: each takes extents (runs of whole
// 64-byte lines within a piece) from the free ones, preferring touched
// memory to a fresh piece, and gives back what it did not use once written;
// a removed version's extents go back and merge with free neighbours. Many
// small versions thus lie in one piece, next to each other.
// Readers hold a version's extents until they finish, so removing a version
// while restore reads it is safe.
//
// Pinned pieces (docs/gpu.md, "Pinned versions in memory"): a store with
// device or managed regions restores them host to device, and a copy out of
// pageable memory runs at a fraction of the bandwidth of one out of pinned
// memory. The device capture hands the level a PiecePinner; from then on a
// piece is pinned, whole and once, when a version written into it first
// lies there (touched first, then pinned: the gpu-cache-allocation paper,
// section IV-B, pins pages that are there already) and stays pinned, reused
// as it is, until the level is destroyed or unpin_pieces() is called. Each
// piece is its own registration, so a copy out of the level is cut at piece
// bounds (Reader::for_each_span). The level knows no driver.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "format/container.h"
#include "tier/level.h"

namespace resurgo {

class MemoryLevel final : public Level {
 public:
  class Image;
  class PiecePool;
  class Reader;

  // Pins pieces for a device driver; set by the device capture.
  struct PiecePinner {
    // Pins [data, data + bytes); false when it cannot (it says why itself):
    // the level then pins no more pieces and they stay pageable.
    std::function<bool(void* data, std::size_t bytes)> pin;
    // Undoes one pin() that returned true; must not throw.
    std::function<void(void* data, std::size_t bytes)> unpin;
  };

  // `capacity` bytes (rounded down to whole pieces, at least one).
  MemoryLevel(const std::string& store, int rank, std::uint64_t capacity, int keep);
  ~MemoryLevel() override;

  int number() const override { return kL1; }
  Features features() const override;
  std::string where() const override;

  void prepare() override {}
  // Writes the version into extents taken from the pool; visible only once
  // complete. Throws LevelFullError when the pool runs out (the message says
  // how much the level holds and what to raise or discard).
  void commit(int version, const std::function<void(WritableFile&)>& write) override;
  void commit_copy(int version, const ReadableFile& source) override;

  std::vector<int> versions() override;
  bool holds(int version) override;
  // NotFoundError when the level does not hold the version.
  std::unique_ptr<ReadableFile> open(int version) override;
  // A damaged copy in memory has nothing left to inspect: it is dropped.
  void quarantine(int version) override;
  void remove(int version) override;
  std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases = {}) override;

  std::uint64_t capacity() const;
  std::uint64_t free_bytes() const;
  // Bytes a copy of a version whose container file has `file_bytes` takes
  // here; it fits when free_bytes() are at least that many (and no other
  // commit takes memory meanwhile).
  std::uint64_t footprint(std::uint64_t file_bytes) const;
  // Bytes of pieces taken from the system so far (kept until the level ends).
  std::uint64_t allocated_bytes() const;
  // Called (without locks held) whenever a removed version's memory returns
  // to the pool (not for the rest of what a commit took, which was free
  // before the commit). Must not throw.
  // Returns once no call of the listener it replaces runs; not to be
  // called from a listener.
  void on_space_freed(std::function<void()> listener);

  // Pins the pieces of each version committed from now on, once written
  // (see above). Set once; a later call is ignored.
  void pin_pieces(PiecePinner pinner);
  // Unpins every piece and pins no more, letting the pinner go (the
  // store's close: the driver's context goes with it). Versions stay
  // readable, from pageable pieces.
  void unpin_pieces();
  // Bytes of pieces pinned now.
  std::uint64_t pinned_bytes() const;
  // The version's bytes where they lie, for a copy that reads them there;
  // null when the level does not hold it.
  std::unique_ptr<Reader> open_in_place(int version);

 private:
  // `expected`: the version's size where known, else 0.
  void commit_image(int version, std::uint64_t expected, const std::function<void(WritableFile&)>& write);

  std::string store_;
  int rank_;
  int keep_;
  std::shared_ptr<PiecePool> pool_;
  mutable std::mutex mutex_;
  std::map<int, std::shared_ptr<const Image>> images_;
};

// One version held in the level, read in place: a host-to-device copy
// reads the pieces themselves, span by span, never across a piece bound
// (a copy over two registrations is refused by the CUDA driver:
// gpu/host_pinner.h, for_each_pin_piece). The version's pieces are held
// (and are never written again) while the reader lives.
// A chunk restored from here is copied and checksummed in one pass
// (format::ReadsHashed).
class MemoryLevel::Reader final : public ReadableFile, public format::ReadsHashed {
 public:
  explicit Reader(std::shared_ptr<const Image> image) : image_(std::move(image)) {}
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override;
  // In one pass (base/copy_checksum.h) when the range lies in one run of
  // consecutive bytes of a piece (a chunk does); another range is read,
  // then checksummed.
  std::uint64_t read_hashed_at(std::uint64_t offset, void* data, std::size_t bytes) const override;
  std::uint64_t size() const override;
  const std::string& path() const override;

  using Span = std::function<void(const std::byte* data, std::uint64_t bytes)>;
  // Calls `span` for each part of [offset, offset + bytes) that lies in one
  // piece, in order. StorageError for a range past the end.
  void for_each_span(std::uint64_t offset, std::uint64_t bytes, const Span& span) const;
  // The checksum (base/checksum.h's XXH3) of [offset, offset + bytes),
  // computed where the bytes lie. StorageError for a range past the end.
  std::uint64_t checksum(std::uint64_t offset, std::uint64_t bytes) const;

 private:
  std::shared_ptr<const Image> image_;
};

}  // namespace resurgo
