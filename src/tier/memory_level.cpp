#include "tier/memory_level.h"

#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <span>
#include <utility>

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
// backs the hint, one fault for a fresh piece instead of 512. The unit
// taken from the system and the unit of pinning; versions share pieces.
constexpr std::uint64_t kPieceBytes = 2u << 20;

// A cache line. Extents start and end at line bounds: a chunk placed at the
// next line bound of its extent lies at a line bound in memory, and two
// versions written at once never store into one line. A version wastes at
// most 63 bytes at its end; a coarser grain (4 KiB) would waste up to a
// page per version, as much as a 4 KiB state itself.
constexpr std::uint64_t kLineBytes = 64;

std::uint64_t line_up(std::uint64_t bytes) { return (bytes + kLineBytes - 1) / kLineBytes * kLineBytes; }

// The longest chunk a writer appends here (AppendsInMemory::longest_run):
// a chunk is copied and hashed in one pass, at checkpoint and at restore,
// only within one run of a piece. A piece less 4 KiB: the chunk, its
// record and gap fit one piece with room for a version's header or index,
// and a region of less than 2 MiB stays one chunk.
constexpr std::uint64_t kLongestChunk = kPieceBytes - 4096;

// The piece that holds `at`: pieces are aligned to their size.
std::byte* piece_of(const std::byte* at) {
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(at) & ~(kPieceBytes - 1));
}

struct FreeDeleter {
  void operator()(std::byte* piece) const { std::free(piece); }
};
using Piece = std::unique_ptr<std::byte[], FreeDeleter>;

// A run of bytes within one piece, at a line bound and whole lines long.
struct Extent {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};

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

  // Pins the pieces the extents (written, so touched) lie in that are not
  // pinned yet, until the pinner first fails. Outside the lock: a
  // registration takes time. Versions share pieces, so a piece that another
  // call is pinning (claimed_) is left to that call.
  void pin(const std::vector<Extent>& extents) {
    MemoryLevel::PiecePinner pinner;
    {
      std::lock_guard lock(mutex_);
      if (failed_ || stopped_ || !pinner_.pin) return;
      pinner = pinner_;
    }
    for (const Extent& extent : extents) {
      std::byte* piece = piece_of(extent.data);
      {
        std::lock_guard lock(mutex_);
        if (failed_ || stopped_) return;
        if (pinned_.count(piece) != 0 || !claimed_.insert(piece).second) continue;
      }
      const bool pinned = pinner.pin(piece, kPieceBytes);
      std::unique_lock lock(mutex_);
      claimed_.erase(piece);
      if (pinned && stopped_) {
        lock.unlock();
        pinner.unpin(piece, kPieceBytes);
        return;
      }
      if (!pinned) {
        failed_ = true;
        return;
      }
      pinned_.insert(piece);
    }
  }

  // Unpins every piece and pins no more; lets the pinner go. A pin() in
  // flight unpins what it pinned itself.
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
  std::set<std::byte*> claimed_;  // being pinned by a pin() call
};

}  // namespace

// Pieces, taken from the system lazily up to the capacity and kept until
// the pool ends (touched memory is what a version should be written into),
// and the free extents within them. A version takes whole free extents and
// gives back what it did not use; free neighbours within a piece coalesce,
// so that removed versions leave room for one of nearly a piece again.
// Takes and gives cost O(log n) in the n free extents.
class MemoryLevel::PiecePool {
 public:
  PiecePool(std::string store, std::uint64_t capacity)
      : store_(std::move(store)), max_pieces_(std::max<std::uint64_t>(1, capacity / kPieceBytes)) {}
  // Every extent is back here (each image holds the pool): unpinned before freed.
  ~PiecePool() { pins.stop(); }
  PiecePool(const PiecePool&) = delete;
  PiecePool& operator=(const PiecePool&) = delete;

  PinnedPieces pins;

  const std::string& store() const { return store_; }
  std::uint64_t capacity() const { return max_pieces_ * kPieceBytes; }
  std::uint64_t free_bytes() {
    std::lock_guard lock(mutex_);
    return capacity() - held_;
  }
  std::uint64_t allocated_bytes() {
    std::lock_guard lock(mutex_);
    return pieces_.size() * kPieceBytes;
  }

  // A whole free extent for an image that grows and gives back its rest:
  // the smallest that holds `need` bytes (at most a piece), else a fresh
  // piece while the capacity allows one, else the largest whatever its
  // size; none (null data) when nothing is free. The smallest, not the
  // largest: a version that replaces one of its size (an evicted or
  // consumed checkpoint) then lands in the hole that one left, whose lines
  // are likely still in cache (the largest free extent would march new
  // versions through cold memory), and large extents stay whole for large
  // versions. Where no hole holds it, the piece's rest is the only fit, so
  // consecutive versions lie side by side.
  Extent take(std::uint64_t need) {
    need = std::min(line_up(need), kPieceBytes);
    std::lock_guard lock(mutex_);
    auto fit = by_size_.lower_bound({need, nullptr});
    if (fit == by_size_.end() && pieces_.size() < max_pieces_) return hold(fresh_piece());
    if (fit == by_size_.end() && !by_size_.empty()) fit = std::prev(by_size_.end());
    if (fit == by_size_.end()) return {};
    const Extent taken{fit->second, fit->first};
    by_size_.erase(fit);
    by_address_.erase(taken.data);
    return hold(taken);
  }

  // Then calls the listener, without the lock (it may call back), unless
  // the extents are the rest of what a commit under way took (`rest`): that
  // memory was free before the commit, and the version's arrival at the
  // level tells the listener's owner anyway (the store pokes its prefetcher
  // at every commit), so a call per commit would only cost each checkpoint.
  void give(std::span<const Extent> extents, bool rest = false) {
    if (extents.empty()) return;
    std::function<void()> listener;
    {
      std::lock_guard lock(mutex_);
      for (const Extent& extent : extents) {
        held_ -= extent.bytes;
        add_free(extent);
      }
      if (!rest) listener = listener_;
      if (listener) ++listening_;
    }
    if (!listener) return;
    listener();
    std::lock_guard lock(mutex_);
    if (--listening_ == 0) listened_.notify_all();
  }

  // Returns once no call of the listener it replaces runs (a removal on
  // another thread may be calling it): what the old one refers to may then
  // go (the store's close resets its prefetcher next).
  void set_listener(std::function<void()> listener) {
    std::unique_lock lock(mutex_);
    listener_ = std::move(listener);
    listened_.wait(lock, [&] { return listening_ == 0; });
  }

 private:
  Extent hold(Extent extent) {
    held_ += extent.bytes;
    return extent;
  }

  Extent fresh_piece() {
    Piece piece(static_cast<std::byte*>(std::aligned_alloc(kPieceBytes, kPieceBytes)));
    if (!piece) {
      throw StorageError("the L1 memory level of store '" + store_ + "' cannot allocate " + size_text(kPieceBytes) +
                         " of memory; lower memory.capacity");
    }
    ::madvise(piece.get(), kPieceBytes, MADV_HUGEPAGE);  // a hint: without THP the piece works the same
    pieces_.push_back(std::move(piece));
    return {pieces_.back().get(), kPieceBytes};
  }

  // Merges the extent with the free ones that end where it starts and start
  // where it ends, within its piece (the next piece may lie right after it
  // in memory, but an extent never crosses a piece bound).
  void add_free(Extent extent) {
    auto next = by_address_.lower_bound(extent.data);
    if (next != by_address_.end() && next->first == extent.data + extent.bytes &&
        piece_of(next->first) == piece_of(extent.data)) {
      extent.bytes += next->second;
      next = remove_free(next);
    }
    if (next != by_address_.begin()) {
      const auto before = std::prev(next);
      if (before->first + before->second == extent.data && piece_of(before->first) == piece_of(extent.data)) {
        extent = {before->first, extent.bytes + before->second};
        remove_free(before);
      }
    }
    by_address_.emplace(extent.data, extent.bytes);
    by_size_.emplace(extent.bytes, extent.data);
  }

  std::map<std::byte*, std::uint64_t>::iterator remove_free(std::map<std::byte*, std::uint64_t>::iterator at) {
    by_size_.erase({at->second, at->first});
    return by_address_.erase(at);
  }

  std::string store_;
  const std::uint64_t max_pieces_;
  std::mutex mutex_;
  std::vector<Piece> pieces_;
  std::uint64_t held_ = 0;                                  // bytes in extents that images hold
  std::map<std::byte*, std::uint64_t> by_address_;          // free extents: start -> bytes
  std::set<std::pair<std::uint64_t, std::byte*>> by_size_;  // the same, by size
  std::function<void()> listener_;
  int listening_ = 0;  // calls of a listener under way
  std::condition_variable listened_;
};

// One version's container bytes, in extents of the pool's pieces; gives
// them back when destroyed. The bytes lie in segments, each a run of
// consecutive bytes within one piece. A chunk copied and hashed in one pass
// (a capture's) starts a segment of its own at the next 64-byte bound of
// its extent when it fits there: its copy then stores whole cache lines,
// where one that starts wherever the record before it ends stores each line
// in two halves, at about twice the cost of a store within a line. The gap
// costs at most 63 bytes a chunk; footprint() counts none, since the level
// copies versions (prefetch) without gaps.
class MemoryLevel::Image {
 public:
  // `expected`: the version's size where known (a copy's), else 0.
  Image(std::shared_ptr<PiecePool> pool, int version, int rank, std::uint64_t expected)
      : pool_(std::move(pool)), version_(version), rank_(rank), expected_(expected) {}
  ~Image() { pool_->give(extents_); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  // Named when first asked (an error message, a restore's checks): a
  // checkpoint that nothing asks pays no formatting. Named under a mutex,
  // not std::call_once: glibc's first call_once of each flag ends in a
  // futex wake-up system call, which every version's first restore paid.
  // Written once, never changed after: the reference stays valid.
  const std::string& path() const {
    const std::lock_guard lock(path_mutex_);
    if (path_.empty()) path_ = "memory:" + pool_->store() + "/" + format::container_file_name(version_, rank_);
    return path_;
  }
  std::uint64_t size() const { return size_; }

  // Throws MemoryFull when the pool is exhausted.
  void append(const std::byte* data, std::uint64_t bytes) {
    while (bytes > 0) {
      if (room() == 0) take_extent(bytes);
      const std::uint64_t part = std::min(bytes, room());
      std::memcpy(place(fill_, part), data, part);
      data += part;
      bytes -= part;
    }
  }

  // append() in one pass with the checksum (base/copy_checksum.h) where the
  // bytes lie in one run; otherwise an append then the checksum of the
  // source.
  std::uint64_t append_hashed(const std::byte* data, std::uint64_t bytes) {
    if (bytes > 0 && bytes <= kPieceBytes) {
      if (std::byte* run = run_for(bytes)) return copy_checksum(run, data, bytes);
    }
    append(data, bytes);
    return checksum(data, bytes);
  }

  void overwrite(std::uint64_t offset, const std::byte* data, std::uint64_t bytes) {
    for_each_part(offset, bytes, [&](std::byte* at, std::uint64_t done, std::uint64_t length) {
      std::memcpy(at, data + done, length);
    });
  }

  // The version is written: the rest of its last extent goes back, and its
  // pieces (touched) may be pinned.
  void written() {
    if (extents_.empty()) return;
    give_back_rest();
    pool_->pins.pin(extents_);
  }

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

  std::uint64_t room() const { return extents_.empty() ? 0 : extents_.back().bytes - fill_; }

  // The next `bytes` in one run, placed: at the next 64-byte bound of the
  // last extent, else right after its last byte, else at the start of an
  // extent taken for them (the last one's rest goes back first, so that a
  // free neighbour may make it large enough). Null when the pool has no
  // extent that large left: append() then spreads them.
  std::byte* run_for(std::uint64_t bytes) {
    if (!extents_.empty()) {
      const std::uint64_t aligned = line_up(fill_);
      if (aligned + bytes <= extents_.back().bytes) return place(aligned, bytes);
      if (fill_ + bytes <= extents_.back().bytes) return place(fill_, bytes);
      give_back_rest();
    }
    take_extent(bytes);
    return room() >= bytes ? place(0, bytes) : nullptr;
  }

  // Asks for `need` bytes; the first extent of a version whose size is
  // known for all of it. Throws MemoryFull when the pool is exhausted.
  void take_extent(std::uint64_t need) {
    const Extent extent = pool_->take(extents_.empty() ? std::max(need, expected_) : need);
    if (extent.data == nullptr) throw MemoryFull();
    extents_.push_back(extent);
    fill_ = 0;
  }

  // Gives back the last extent's lines past its fill (each extent holds at
  // least one written byte: every take is followed by a place).
  void give_back_rest() {
    Extent& last = extents_.back();
    const std::uint64_t kept = line_up(fill_);
    if (kept == last.bytes) return;
    const Extent rest{last.data + kept, last.bytes - kept};
    pool_->give(std::span(&rest, 1), true);
    last.bytes = kept;
  }

  // The next `bytes` of the version, at `at` in the last extent (at or
  // after its fill): extends the last segment when they follow it in its
  // piece.
  std::byte* place(std::uint64_t at, std::uint64_t bytes) {
    std::byte* where = extents_.back().data + at;
    if (!segments_.empty() && segments_.back().data + segments_.back().bytes == where &&
        piece_of(segments_.back().data) == piece_of(where)) {
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
  const std::uint64_t expected_;
  mutable std::mutex path_mutex_;
  mutable std::string path_;
  std::vector<Extent> extents_;  // held, in the version's order
  std::vector<Segment> segments_;
  std::uint64_t size_ = 0;
  std::uint64_t fill_ = 0;  // bytes used of the last extent
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
  std::uint64_t longest_run() const override { return kLongestChunk; }
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
// A copy writes no gaps, and extents are whole lines.
std::uint64_t MemoryLevel::footprint(std::uint64_t file_bytes) const { return line_up(file_bytes); }
std::uint64_t MemoryLevel::allocated_bytes() const { return pool_->allocated_bytes(); }
void MemoryLevel::on_space_freed(std::function<void()> listener) { pool_->set_listener(std::move(listener)); }
void MemoryLevel::pin_pieces(PiecePinner pinner) { pool_->pins.set(std::move(pinner)); }
void MemoryLevel::unpin_pieces() { pool_->pins.stop(); }
std::uint64_t MemoryLevel::pinned_bytes() const { return pool_->pins.count() * kPieceBytes; }

void MemoryLevel::commit(int version, const std::function<void(WritableFile&)>& write) {
  commit_image(version, 0, write);
}

// A copy's size is known: it first asks for an extent that holds all of it,
// so that its chunks lie in one run each (one pass at restore), and takes
// a fresh piece for that only when no free extent is large enough.
void MemoryLevel::commit_copy(int version, const ReadableFile& source) {
  const format::Container container = format::read_container(source);
  format::check_identity(container, source.path(), "", version, rank_);
  commit_image(version, source.size(), [&](WritableFile& file) { format::copy_verified(source, container, file); });
}

void MemoryLevel::commit_image(int version, std::uint64_t expected, const std::function<void(WritableFile&)>& write) {
  auto image = std::make_shared<Image>(pool_, version, rank_, expected);
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
  std::shared_ptr<const Image> replaced;  // freed after the lock is released: the listener may call back
  std::lock_guard lock(mutex_);
  replaced = std::exchange(images_[version], std::move(image));
}

std::vector<int> MemoryLevel::versions() {
  std::lock_guard lock(mutex_);
  std::vector<int> found;
  found.reserve(images_.size());  // one allocation: the eviction at every checkpoint asks
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
