// ByteRanges: the bytes of one region already claimed, as disjoint ranges.
// Restore of a chain walks its links newest first and claims each chunk's
// range: what a newer link already holds is never read again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
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
  // Marks [begin, end) claimed and returns the parts of it that were not
  // claimed before, ascending (empty when all of it was).
  std::vector<ByteRange> claim(std::uint64_t begin, std::uint64_t end) {
    std::vector<ByteRange> fresh;
    // The first claimed range that could touch [begin, end): the one starting
    // at or before `begin`, if it reaches it.
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin) --it;
    std::uint64_t cursor = begin;
    std::uint64_t merged_begin = begin;
    std::uint64_t merged_end = end;
    while (it != ranges_.end() && it->first <= end) {
      if (it->first > cursor) fresh.push_back({cursor, it->first});
      cursor = std::max(cursor, it->second);
      merged_begin = std::min(merged_begin, it->first);
      merged_end = std::max(merged_end, it->second);
      it = ranges_.erase(it);
    }
    if (cursor < end) fresh.push_back({cursor, end});
    ranges_[merged_begin] = merged_end;
    return fresh;
  }

  std::size_t range_count() const { return ranges_.size(); }

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;  // begin -> end, disjoint, not adjacent
};

}  // namespace resurgo
