#include "track/hash_tracker.h"

#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
// Routes XXH3 calls to libxxhash's run-time dispatch (AVX2/AVX-512 where the
// CPU has them); the portable build is SSE2 only and half as fast.
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace resurgo::track {

namespace {

class HashTracker final : public Tracker {
 public:
  Method method() const override { return Method::kHash; }

  void watch(int id, std::byte* base, std::size_t bytes) override {
    if (base == nullptr || bytes == 0) {
      throw InvalidArgumentError("hash: watch of " + describe_region(id, base, bytes) +
                                 ": the region is empty");
    }
    if (!regions_.try_emplace(id, Region{base, bytes, 0, {}}).second) {
      throw InvalidArgumentError("hash: watch of " + describe_region(id, base, bytes) + ": region id " +
                                 std::to_string(id) + " is already watched");
    }
  }

  // Hashing changes nothing in the memory: nothing to give back.
  void unwatch(int id) override { regions_.erase(id); }

  PageSet collect(int id, std::size_t block_pages) override {
    check_block_pages("hash", id, block_pages);
    const auto found = regions_.find(id);
    if (found == regions_.end()) {
      throw InvalidArgumentError("hash: collect of region " + std::to_string(id) +
                                 ": this region id is not watched");
    }
    Region& region = found->second;
    PageSet written(pages_spanned(region.base, region.bytes));
    if (region.hashes.empty()) {  // never collected: every page counts as written
      written.insert_range(0, written.pages());
    } else {
      std::vector<std::uint64_t> now = hashes(region, region.block_pages);
      for (std::size_t block = 0; block < now.size(); ++block) {
        if (now[block] != region.hashes[block]) {
          written.insert_range(block * region.block_pages, region.block_pages);
        }
      }
      region.hashes = std::move(now);
    }
    // The next interval's blocks, hashed anew from the memory as it is now.
    if (region.hashes.empty() || block_pages != region.block_pages) {
      region.block_pages = block_pages;
      region.hashes = hashes(region, block_pages);
    }
    return written;
  }

 private:
  struct Region {
    std::byte* base;
    std::size_t bytes;
    std::size_t block_pages;            // of `hashes`
    std::vector<std::uint64_t> hashes;  // one per block; empty before the first collect
  };

  // One hash per block of `block_pages` pages, each over the region's bytes
  // in the block's pages: the first and last blocks are clipped to the region.
  static std::vector<std::uint64_t> hashes(const Region& region, std::size_t block_pages) {
    const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(region.base);
    const std::uintptr_t end = begin + region.bytes;
    const std::size_t block_bytes = block_pages * page_size();
    const std::uintptr_t first_block_start = begin / page_size() * page_size();
    const std::size_t pages = pages_spanned(region.base, region.bytes);
    std::vector<std::uint64_t> result((pages + block_pages - 1) / block_pages);
    for (std::size_t block = 0; block < result.size(); ++block) {
      const std::uintptr_t start = std::max(begin, first_block_start + block * block_bytes);
      const std::uintptr_t stop = std::min(end, first_block_start + (block + 1) * block_bytes);
      result[block] = XXH3_64bits(reinterpret_cast<const void*>(start), stop - start);
    }
    return result;
  }

  std::map<int, Region> regions_;
};

}  // namespace

std::unique_ptr<Tracker> make_hash_tracker() { return std::make_unique<HashTracker>(); }

}  // namespace resurgo::track
