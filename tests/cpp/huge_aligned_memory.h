// Anonymous memory aligned to the huge page size (so that it holds whole
// huge pages: a fork leaves them out of the child whole, MADV_COLLAPSE
// finds them whole), private or shared: the capture tests' regions.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <vector>

#include "capture/huge_page_collapse.h"

namespace resurgo::testing {

class HugeAlignedMemory {
 public:
  explicit HugeAlignedMemory(std::size_t bytes, bool shared = false) : bytes_(bytes) {
    const std::size_t huge = std::max<std::size_t>(huge_page_bytes(), 4096);
    mapped_bytes_ = bytes + huge;
    mapped_ = ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                     (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (mapped_ == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
    data_ = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mapped_) + huge - 1) / huge * huge);
  }
  ~HugeAlignedMemory() { ::munmap(mapped_, mapped_bytes_); }
  HugeAlignedMemory(const HugeAlignedMemory&) = delete;
  HugeAlignedMemory& operator=(const HugeAlignedMemory&) = delete;

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // Writes every page, a pattern that differs with `seed`.
  void fill(int seed) {
    for (std::size_t i = 0; i < bytes_; i += 8) data_[i] = static_cast<std::byte>(seed + i / 4096);
  }
  std::vector<std::byte> copy() const { return {data_, data_ + bytes_}; }
  bool equals(const std::vector<std::byte>& saved) const { return std::memcmp(data_, saved.data(), bytes_) == 0; }

 private:
  std::size_t bytes_;
  std::size_t mapped_bytes_;
  void* mapped_;
  std::byte* data_;
};

}  // namespace resurgo::testing
