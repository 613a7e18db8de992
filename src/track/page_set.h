// PageSet: which pages of a region were written, one bit per page. Page i
// is the i-th system page the region's bytes touch (page 0 holds its first
// byte), so a region that does not start on a page boundary still has whole
// pages.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace resurgo::track {

class PageSet {
 public:
  explicit PageSet(std::size_t pages = 0) : words_((pages + 63) / 64), pages_(pages) {}

  std::size_t pages() const { return pages_; }
  void insert(std::size_t page) { words_[page / 64] |= std::uint64_t{1} << (page % 64); }
  void insert_range(std::size_t first, std::size_t count) {
    for (std::size_t page = first; page < first + count && page < pages_; ++page) insert(page);
  }
  bool contains(std::size_t page) const { return (words_[page / 64] >> (page % 64)) & 1; }
  std::size_t count() const {
    std::size_t total = 0;
    for (std::uint64_t word : words_) total += static_cast<std::size_t>(std::popcount(word));
    return total;
  }
  // Calls fn(first, count) for each run of consecutive written pages, in order.
  template <class Fn>
  void for_each_run(Fn&& fn) const {
    std::size_t page = 0;
    while (page < pages_) {
      if (!contains(page)) {
        ++page;
        continue;
      }
      const std::size_t first = page;
      while (page < pages_ && contains(page)) ++page;
      fn(first, page - first);
    }
  }
  // Adds the pages of `other`, a set over the same region.
  PageSet& operator|=(const PageSet& other) {
    for (std::size_t i = 0; i < words_.size() && i < other.words_.size(); ++i) words_[i] |= other.words_[i];
    return *this;
  }
  bool operator==(const PageSet&) const = default;

 private:
  std::vector<std::uint64_t> words_;
  std::size_t pages_;
};

}  // namespace resurgo::track
