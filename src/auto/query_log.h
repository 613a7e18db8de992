// The values the loops returned to the application (reductions, queries),
// in order: a restarted run replays its control flow by receiving the same
// values at the same loops. Each record holds the loop index at which the
// value was asked, its size and the low 32 bits of the loop-sequence hash
// there, so that a replay taking another path is caught at the first query
// it asks differently. Only queries are recorded, never loops: the log grows
// with the bytes queried, not with the number of loops. The encoded log
// starts with the record count (u64, little-endian), so that it is never
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
    std::size_t bytes = 8;
    std::uint64_t count = 0;
  };

  void append(std::uint64_t loop_index, std::uint32_t sequence, const void* data, std::size_t bytes);
  Mark mark() const { return {encoded_.size(), count_}; }
  // Calls `use(bytes, size)` with the log as it was at `mark` (the queries
  // asked since are not in it); the bytes are valid only during the call.
  template <class Use>
  void as_of(const Mark& mark, Use&& use) {
    put_count(mark.count);
    use(encoded_.data(), mark.bytes);
    put_count(count_);
  }
  void clear();
  // The encoded records (what a checkpoint saves).
  const std::vector<std::byte>& encoded() const { return encoded_; }
  std::uint64_t count() const { return count_; }
  // Adopts a log read from a checkpoint (validated by QueryReplay first).
  void assign(std::vector<std::byte> encoded, std::uint64_t count, std::uint64_t last_loop_index);

 private:
  void put_count(std::uint64_t count);

  std::vector<std::byte> encoded_;
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
