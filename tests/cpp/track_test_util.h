// Memory and page sets shared by the tracker tests.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "track/page_set.h"
#include "track/tracker.h"

namespace resurgo::track {

// Whole pages mapped with `protection` and `flags` (anonymous private memory
// unless told otherwise; MAP_SHARED with a descriptor maps a file), unmapped
// on destruction.
class PageMapping {
 public:
  explicit PageMapping(std::size_t pages, int protection = PROT_READ | PROT_WRITE,
                   int flags = MAP_PRIVATE | MAP_ANONYMOUS, int fd = -1)
      : bytes_(pages * page_size()) {
    void* memory = ::mmap(nullptr, bytes_, protection, flags, fd, 0);
    if (memory == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    base_ = static_cast<std::byte*>(memory);
  }
  ~PageMapping() { ::munmap(base_, bytes_); }
  PageMapping(const PageMapping&) = delete;
  PageMapping& operator=(const PageMapping&) = delete;

  std::byte* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }
  std::byte* page(std::size_t index) const { return base_ + index * page_size(); }
  void fill(std::byte value) const { std::memset(base_, static_cast<int>(value), bytes_); }

 private:
  std::size_t bytes_;
  std::byte* base_ = nullptr;
};

inline PageSet pages_of(std::size_t pages, const std::vector<std::size_t>& written) {
  PageSet set(pages);
  for (std::size_t page : written) set.insert(page);
  return set;
}

inline PageSet every_page(std::size_t pages) {
  PageSet set(pages);
  set.insert_range(0, pages);
  return set;
}

}  // namespace resurgo::track
