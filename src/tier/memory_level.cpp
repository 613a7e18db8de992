#include "tier/memory_level.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>

#include "base/checksum.h"
#include "base/copy_checksum.h"
#include "format/file_names.h"
#include "base/units.h"
#include "format/container.h"
#include "resurgo/errors.hpp"
#include "tier/directory_level.h"
#include "tier/eviction.h"

namespace resurgo {

namespace {

// 2 MiB, aligned: one transparent huge page per piece where the kernel
// backs the hint, one fault for a fresh piece instead of 512.
constexpr std::uint64_t kPieceBytes = 2u << 20;

struct FreeDeleter {
  void operator()(std::byte* piece) const { std::free(piece); }
};
using Piece = std::unique_ptr<std::byte[], FreeDeleter>;


// The pool ran out while a version was written; commit() says what to do.
class MemoryFull : public StorageError {
 public:
  MemoryFull() : StorageError("the memory level is full") {}
};

// The pieces pinned through the level's PiecePinner, by address: a piece
// keeps its address from its allocation to the pool's end, which unpins
// first.
class PinnedPieces {
 public:
  void set(MemoryLevel::PiecePinner pinner) {
    std::lock_guard lock(mutex_);
    if (!pinner_.pin && !stopped_) pinner_ = std::move(pinner);
  }

  // Pins those of `pieces` (written, so touched) not pinned yet, until the
  // pinner first fails. Outside the lock: a registration takes time.
  void pin(const std::vector<Piece>& pieces) {
    MemoryLevel::PiecePinner pinner;
    {
      std::lock_guard lock(mutex_);
      if (failed_ || stopped_ || !pinner_.pin) return;
      pinner = pinner_;
    }
    for (const Piece& piece : pieces) {
      {
        std::lock_guard lock(mutex_);
        if (pinned_.count(piece.get()) != 0) continue;
      }
      const bool pinned = pinner.pin(piece.get(), kPieceBytes);
      std::unique_lock lock(mutex_);
      if (pinned && stopped_) {
        lock.unlock();
        pinner.unpin(piece.get(), kPieceBytes);
        return;
      }
      if (!pinned) {
        failed_ = true;
        return;
      }
      pinned_.insert(piece.get());
    }
  }

  // Unpins every piece and pins no more; lets the pinner go.
  void stop() {
    std::set<std::byte*> pinned;
    MemoryLevel::PiecePinner pinner;
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
      pinned.swap(pinned_);
      std::swap(pinner, pinner_);
    }
    for (std::byte* piece : pinned) pinner.unpin(piece, kPieceBytes);
  }

  std::uint64_t count() {
    std::lock_guard lock(mutex_);
    return pinned_.size();
  }

 private:
  std::mutex mutex_;
  MemoryLevel::PiecePinner pinner_;  // none: pieces stay pageable
  bool failed_ = false;
  bool stopped_ = false;
  std::set<std::byte*> pinned_;
};

}  // namespace

class MemoryLevel::PiecePool {
 public:
  PiecePool(std::string store, std::uint64_t capacity)
      : store_(std::move(store)), pieces_(std::max<std::uint64_t>(1, capacity / kPieceBytes)) {}
  // Every piece is back here (each image holds the pool): unpinned before freed.
  ~PiecePool() { pins.stop(); }
  PiecePool(const PiecePool&) = delete;
  PiecePool& operator=(const PiecePool&) = delete;

  PinnedPieces pins;

  const std::string& store() const { return store_; }
  std::uint64_t capacity() const { return pieces_ * kPieceBytes; }
  std::uint64_t free_bytes() {
    std::lock_guard lock(mutex_);
    return (pieces_ - out_) * kPieceBytes;
  }

  // A piece, reused when one is free; null when the capacity is exhausted.
  Piece take() {
    std::lock_guard lock(mutex_);
    if (out_ == pieces_) return nullptr;
    ++out_;
    if (!free_.empty()) {
      Piece piece = std::move(free_.back());
      free_.pop_back();
      return piece;
    }
    Piece piece(static_cast<std::byte*>(std::aligned_alloc(kPieceBytes, kPieceBytes)));
    if (!piece) {
      --out_;
      throw StorageError("the L1 memory level of store '" + store_ + "' cannot allocate " + size_text(kPieceBytes) +
                         " of memory; lower memory.capacity");
    }
    ::madvise(piece.get(), kPieceBytes, MADV_HUGEPAGE);  // a hint: without THP the piece works the same
    return piece;
  }

  void give(std::vector<Piece>& pieces) {
    if (pieces.empty()) return;
    std::function<void()> listener;
    {
      std::lock_guard lock(mutex_);
      out_ -= pieces.size();
      for (Piece& piece : pieces) free_.push_back(std::move(piece));
      listener = listener_;
    }
    pieces.clear();
    if (listener) listener();
  }

  void set_listener(std::function<void()> listener) {
    std::lock_guard lock(mutex_);
    listener_ = std::move(listener);
  }

 private:
  std::string store_;
  const std::uint64_t pieces_;
  std::mutex mutex_;
  std::uint64_t out_ = 0;
  std::vector<Piece> free_;
  std::function<void()> listener_;
};

// One version's container bytes, in pieces; gives them back when destroyed.
// The bytes lie in segments, each a run of consecutive bytes within one
// piece. A chunk copied and hashed in one pass (a capture's) starts a
// segment of its own at the next 64-byte bound of its piece when it fits
// there: its copy then stores whole cache lines, where one that starts
// wherever the record before it ends stores each line in two halves, at
// about twice the cost of a store within a line. The gap costs at most 63
// bytes a chunk; footprint() counts none, since the level copies versions
// (prefetch) without gaps.
class MemoryLevel::Image {
 public:
  Image(std::shared_ptr<PiecePool> pool, int version, int rank) : pool_(std::move(pool)), version_(version), rank_(rank) {}
  ~Image() { pool_->give(pieces_); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  // Named when first asked (an error message, a copy's check): a checkpoint
  // that nothing asks pays no formatting.
  const std::string& path() const {
    std::call_once(path_named_, [&] {
      path_ = "memory:" + pool_->store() + "/" + format::container_file_name(version_, rank_);
    });
    return path_;
  }
  std::uint64_t size() const { return size_; }

  // Throws MemoryFull when the pool is exhausted.
  void append(const std::byte* data, std::uint64_t bytes) {
    while (bytes > 0) {
      if (fill_ == kPieceBytes) take_piece();
      const std::uint64_t part = std::min(bytes, kPieceBytes - fill_);
      std::memcpy(place(fill_, part), data, part);
      data += part;
      bytes -= part;
    }
  }

  // append() in one pass with the checksum (base/copy_checksum.h) when the
  // bytes fit in the current piece or a fresh one, at a 64-byte bound where
  // they fit there; across a piece bound, an append then the checksum of
  // the source.
  std::uint64_t append_hashed(const std::byte* data, std::uint64_t bytes) {
    if (bytes == 0 || bytes > kPieceBytes) {
      append(data, bytes);
      return checksum(data, bytes);
    }
    if (fill_ == kPieceBytes) take_piece();
    const std::uint64_t aligned = (fill_ + kLineBytes - 1) / kLineBytes * kLineBytes;
    if (aligned + bytes <= kPieceBytes) return copy_checksum(place(aligned, bytes), data, bytes);
    if (fill_ + bytes <= kPieceBytes) return copy_checksum(place(fill_, bytes), data, bytes);
    append(data, bytes);
    return checksum(data, bytes);
  }

  void overwrite(std::uint64_t offset, const std::byte* data, std::uint64_t bytes) {
    for_each_part(offset, bytes, [&](std::byte* at, std::uint64_t done, std::uint64_t length) {
      std::memcpy(at, data + done, length);
    });
  }

  // The version is written: its pieces are touched, and may be pinned.
  void written() { pool_->pins.pin(pieces_); }

  // Never across a piece bound (Reader::for_each_span).
  void for_each_span(std::uint64_t offset, std::uint64_t bytes, const Reader::Span& span) const {
    for_each_part(offset, bytes, [&](const std::byte* at, std::uint64_t, std::uint64_t length) { span(at, length); });
  }

  // Where [offset, offset + bytes) lies when it lies in one segment; null
  // when it spans several.
  const std::byte* in_one_segment(std::uint64_t offset, std::uint64_t bytes) const {
    check_range(offset, bytes);
    if (bytes == 0) return nullptr;
    const Segment& segment = *segment_at(offset);
    if (offset + bytes > segment.offset + segment.bytes) return nullptr;
    return segment.data + (offset - segment.offset);
  }

 private:
  static constexpr std::uint64_t kLineBytes = 64;

  struct Segment {
    std::uint64_t offset;  // of its first byte in the version
    std::byte* data;
    std::uint64_t bytes;
  };

  // Calls visit(where, done, length) for each segment's part of [offset,
  // offset + bytes), in order; `done` counts the bytes before it.
  template <class Visit>
  void for_each_part(std::uint64_t offset, std::uint64_t bytes, const Visit& visit) const {
    check_range(offset, bytes);
    if (bytes == 0) return;
    auto segment = segment_at(offset);
    for (std::uint64_t done = 0; done < bytes; ++segment) {
      const std::uint64_t skip = offset + done - segment->offset;
      const std::uint64_t length = std::min(bytes - done, segment->bytes - skip);
      visit(segment->data + skip, done, length);
      done += length;
    }
  }

  // The segment that holds byte `offset` (< size_).
  std::vector<Segment>::const_iterator segment_at(std::uint64_t offset) const {
    const auto after = std::upper_bound(segments_.begin(), segments_.end(), offset,
                                        [](std::uint64_t at, const Segment& segment) { return at < segment.offset; });
    return std::prev(after);
  }

  // Throws MemoryFull when the pool is exhausted.
  void take_piece() {
    Piece piece = pool_->take();
    if (!piece) throw MemoryFull();
    pieces_.push_back(std::move(piece));
    fill_ = 0;
  }

  // The next `bytes` of the version, at `at` in the last piece (at or after
  // its fill): extends the last segment when they follow it there.
  std::byte* place(std::uint64_t at, std::uint64_t bytes) {
    std::byte* where = pieces_.back().get() + at;
    if (at == fill_ && fill_ > 0) {
      segments_.back().bytes += bytes;
    } else {
      segments_.push_back({size_, where, bytes});
    }
    fill_ = at + bytes;
    size_ += bytes;
    return where;
  }

  void check_range(std::uint64_t offset, std::uint64_t bytes) const {
    if (offset > size_ || bytes > size_ - offset) {
      throw StorageError("read of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " of '" +
                         path() + "' goes past its end (" + std::to_string(size_) + " bytes)");
    }
  }

  std::shared_ptr<PiecePool> pool_;
  const int version_;
  const int rank_;
  mutable std::once_flag path_named_;
  mutable std::string path_;
  std::vector<Piece> pieces_;
  std::vector<Segment> segments_;
  std::uint64_t size_ = 0;
  std::uint64_t fill_ = kPieceBytes;  // bytes used of the last piece; a full one: take another first
};

void MemoryLevel::Reader::read_at(std::uint64_t offset, void* data, std::size_t bytes) const {
  auto* out = static_cast<std::byte*>(data);
  image_->for_each_span(offset, bytes, [&](const std::byte* span, std::uint64_t length) {
    std::memcpy(out, span, length);
    out += length;
  });
}

std::uint64_t MemoryLevel::Reader::read_hashed_at(std::uint64_t offset, void* data, std::size_t bytes) const {
  if (const std::byte* span = image_->in_one_segment(offset, bytes)) return copy_checksum(data, span, bytes);
  read_at(offset, data, bytes);
  return resurgo::checksum(data, bytes);
}

std::uint64_t MemoryLevel::Reader::size() const { return image_->size(); }
const std::string& MemoryLevel::Reader::path() const { return image_->path(); }

void MemoryLevel::Reader::for_each_span(std::uint64_t offset, std::uint64_t bytes, const Span& span) const {
  image_->for_each_span(offset, bytes, span);
}

std::uint64_t MemoryLevel::Reader::checksum(std::uint64_t offset, std::uint64_t bytes) const {
  PartsChecksum parts;
  image_->for_each_span(offset, bytes, [&](const std::byte* span, std::uint64_t length) { parts.update(span, length); });
  return parts.digest();
}

namespace {

class ImageWriter final : public WritableFile, public format::AppendsInMemory {
 public:
  explicit ImageWriter(MemoryLevel::Image& image) : image_(image) {}
  void append(const void* data, std::size_t bytes) override {
    image_.append(static_cast<const std::byte*>(data), bytes);
  }
  std::uint64_t append_hashed(const void* data, std::size_t bytes) override {
    return image_.append_hashed(static_cast<const std::byte*>(data), bytes);
  }
  void overwrite_appended(std::uint64_t offset, const void* data, std::size_t bytes) override {
    image_.overwrite(offset, static_cast<const std::byte*>(data), bytes);
  }
  void sync() override {}
  void close() override {}
  const std::string& path() const override { return image_.path(); }

 private:
  MemoryLevel::Image& image_;
};

}  // namespace

MemoryLevel::MemoryLevel(const std::string& store, int rank, std::uint64_t capacity, int keep)
    : store_(store), rank_(rank), keep_(keep), pool_(std::make_shared<PiecePool>(store, capacity)) {}

MemoryLevel::~MemoryLevel() = default;

Level::Features MemoryLevel::features() const {
  Features features;
  features.is_volatile = true;
  features.node_local = true;
  return features;
}

std::string MemoryLevel::where() const {
  return "memory of store '" + store_ + "' (capacity " + size_text(pool_->capacity()) + ")";
}

std::uint64_t MemoryLevel::capacity() const { return pool_->capacity(); }
std::uint64_t MemoryLevel::free_bytes() const { return pool_->free_bytes(); }
std::uint64_t MemoryLevel::footprint(std::uint64_t file_bytes) const {
  return (file_bytes + kPieceBytes - 1) / kPieceBytes * kPieceBytes;
}
void MemoryLevel::on_space_freed(std::function<void()> listener) { pool_->set_listener(std::move(listener)); }
void MemoryLevel::pin_pieces(PiecePinner pinner) { pool_->pins.set(std::move(pinner)); }
void MemoryLevel::unpin_pieces() { pool_->pins.stop(); }
std::uint64_t MemoryLevel::pinned_bytes() const { return pool_->pins.count() * kPieceBytes; }

void MemoryLevel::commit(int version, const std::function<void(WritableFile&)>& write) {
  auto image = std::make_shared<Image>(pool_, version, rank_);
  ImageWriter writer(*image);
  try {
    write(writer);
  } catch (const MemoryFull&) {
    std::string held;
    for (int stored : versions()) held += (held.empty() ? "" : ", ") + std::to_string(stored);
    throw LevelFullError("version " + std::to_string(version) + " does not fit in the L1 memory level of store '" +
                       store_ + "': its capacity of " + size_text(pool_->capacity()) + " is held by versions [" +
                       held + "]; raise memory.capacity, lower memory.keep, or discard consumed versions");
  }
  image->written();
  std::lock_guard lock(mutex_);
  images_[version] = std::move(image);
}

void MemoryLevel::commit_copy(int version, const ReadableFile& source) {
  const format::Container container = format::read_container(source);
  format::check_identity(container, source.path(), "", version, rank_);
  commit(version, [&](WritableFile& file) { format::copy_verified(source, container, file); });
}

std::vector<int> MemoryLevel::versions() {
  std::lock_guard lock(mutex_);
  std::vector<int> found;
  for (const auto& [version, image] : images_) found.push_back(version);
  return found;
}

bool MemoryLevel::holds(int version) {
  std::lock_guard lock(mutex_);
  return images_.count(version) != 0;
}

std::unique_ptr<ReadableFile> MemoryLevel::open(int version) {
  std::lock_guard lock(mutex_);
  const auto found = images_.find(version);
  if (found == images_.end()) {
    throw NotFoundError("version " + std::to_string(version) + " of store '" + store_ + "' is not in memory (L1)");
  }
  return std::make_unique<Reader>(found->second);
}

std::unique_ptr<MemoryLevel::Reader> MemoryLevel::open_in_place(int version) {
  std::lock_guard lock(mutex_);
  const auto found = images_.find(version);
  return found == images_.end() ? nullptr : std::make_unique<Reader>(found->second);
}

void MemoryLevel::quarantine(int version) { remove(version); }

void MemoryLevel::remove(int version) {
  std::shared_ptr<const Image> dropped;  // freed after the lock is released: the listener may call back
  std::lock_guard lock(mutex_);
  const auto found = images_.find(version);
  if (found == images_.end()) return;
  dropped = std::move(found->second);
  images_.erase(found);
}

std::vector<int> MemoryLevel::evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases) {
  const auto base = [&](int version) { return base_of(version, known_bases); };
  std::vector<int> removed;
  for (int version : versions_to_evict(versions(), keep_, pinned, base)) {
    remove(version);
    removed.insert(removed.begin(), version);
  }
  return removed;
}

}  // namespace resurgo
