// ByteRanges: the bytes of one region already claimed, as disjoint ranges.
// Restore of a chain walks its links newest first and claims each link's
// chunks: a chunk a newer link holds whole is never read, one it holds in
// part is read before that newer link's chunks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace resurgo {

struct ByteRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;  // exclusive
  std::uint64_t size() const { return end - begin; }
  bool operator==(const ByteRange&) const = default;
};

class ByteRanges {
 public:
  // How much of a range was claimed before it: none, part or all of it.
  enum class Held : std::uint8_t { kNone, kPart, kAll };

  // Claims `ranges` (ascending, disjoint) and says, for each, how much of it
  // was claimed before. One pass over both lists: a chain of scattered 4 KiB
  // deltas claims hundreds of thousands of chunks, one link at a time.
  std::vector<Held> claim(const std::vector<ByteRange>& ranges) {
    std::vector<Held> held;
    held.reserve(ranges.size());
    auto old = ranges_.begin();
    for (const ByteRange& range : ranges) {
      while (old != ranges_.end() && old->end <= range.begin) ++old;
      std::uint64_t covered = 0;
      for (auto it = old; it != ranges_.end() && it->begin < range.end; ++it) {
        covered += std::min(it->end, range.end) - std::max(it->begin, range.begin);
      }
      held.push_back(covered == range.size() ? Held::kAll : covered == 0 ? Held::kNone : Held::kPart);
    }
    merge(ranges);
    return held;
  }

  std::size_t range_count() const { return ranges_.size(); }

 private:
  // ranges_ becomes the union of itself and `ranges`, with adjacent ranges joined.
  void merge(const std::vector<ByteRange>& ranges) {
    std::vector<ByteRange> all(ranges_.size() + ranges.size());
    std::merge(ranges_.begin(), ranges_.end(), ranges.begin(), ranges.end(), all.begin(),
               [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
    ranges_.clear();
    for (const ByteRange& range : all) {
      if (range.size() == 0) continue;
      if (!ranges_.empty() && range.begin <= ranges_.back().end) {
        ranges_.back().end = std::max(ranges_.back().end, range.end);
      } else {
        ranges_.push_back(range);
      }
    }
  }

  std::vector<ByteRange> ranges_;  // ascending, disjoint, not adjacent
};

}  // namespace resurgo
