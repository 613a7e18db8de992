// The values the loops returned to the application (reductions, queries),
// in order: a restarted run replays its control flow by receiving the same
// values at the same loops. Each record holds the loop index at which the
// value was asked, its size and the low 32 bits of the loop-sequence hash
// there, so that a replay taking another path is caught at the first query
// it asks differently. Only queries are recorded, never loops: the log grows
// with the bytes queried, not with the number of loops. The encoded log
// starts with a header (record count, bytes used), so that it is never
// empty: a checkpoint always holds it as a region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace resurgo::autockpt {

class QueryLog {
 public:
  QueryLog();
  // How far the log reached at some point (a checkpoint's restore point).
  struct Mark {
    std::size_t bytes = kHeaderBytes;
    std::uint64_t count = 0;
  };

  void append(std::uint64_t loop_index, std::uint32_t sequence, const void* data, std::size_t bytes);
  Mark mark() const { return {used_, count_}; }
  // Calls `use(bytes, size)` with the log as it was at `mark` (the queries
  // asked since lie past its end and are not read back); the bytes are valid
  // only during the call. The size is the buffer's, a power of two that
  // changes only when the log doubles: a checkpoint that protects it keeps
  // the store's protected size (and its buffer) from one version to the next.
  template <class Use>
  void as_of(const Mark& mark, Use&& use) {
    put_header(mark.count, mark.bytes);
    use(buffer_.data(), buffer_.size());
    put_header(count_, used_);
  }
  void clear();
  // The header and records (what a replay reads).
  std::vector<std::byte> encoded() const { return {buffer_.begin(), buffer_.begin() + static_cast<long>(used_)}; }
  std::uint64_t count() const { return count_; }
  std::uint64_t memory_bytes() const { return buffer_.capacity(); }
  // Adopts a log read from a checkpoint (validated by QueryReplay first).
  void assign(std::vector<std::byte> encoded, std::uint64_t count, std::uint64_t last_loop_index);

  // count (u64) and the bytes used, header included (u64), little-endian.
  static constexpr std::size_t kHeaderBytes = 16;

 private:
  void put_header(std::uint64_t count, std::uint64_t used);

  std::vector<std::byte> buffer_;  // zero past used_
  std::size_t used_ = kHeaderBytes;
  std::uint64_t count_ = 0;
  std::uint64_t last_loop_index_ = 0;
};

// Reads a log back during replay. The constructor checks the structure
// (every length bounded by what is left) and throws CorruptionError naming
// `what` for a damaged log.
class QueryReplay {
 public:
  QueryReplay(std::vector<std::byte> encoded, std::string_view what);

  // Writes the next recorded value into `data`. MismatchError naming the
  // loop when the replay asks another size, at another loop, after another
  // loop sequence, or more values than were recorded.
  void next(std::uint64_t loop_index, std::uint32_t sequence, std::string_view loop_name, void* data,
            std::size_t bytes);
  std::uint64_t replayed() const { return position_; }
  std::uint64_t count() const { return records_.size(); }
  std::uint64_t last_loop_index() const { return records_.empty() ? 0 : records_.back().loop_index; }
  // Gives the encoded records back (for the log of the resumed run).
  std::vector<std::byte> release() { return std::move(encoded_); }

 private:
  struct Record {
    std::uint64_t loop_index = 0;
    std::uint32_t sequence = 0;
    std::uint64_t offset = 0;  // of the value in encoded_
    std::uint64_t bytes = 0;
  };

  std::vector<std::byte> encoded_;
  std::vector<Record> records_;
  std::uint64_t position_ = 0;
};

}  // namespace resurgo::autockpt
