// Pageable host memory of its own pages (none of another allocation shares
// them, so a test may register exactly these with cuMemHostRegister),
// zeroed, unmapped on destruction. data() is null when the mapping failed.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>

class HostPages {
 public:
  explicit HostPages(std::size_t bytes) : bytes_(bytes) {
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = mapped == MAP_FAILED ? nullptr : static_cast<unsigned char*>(mapped);
    if (data_ != nullptr) std::memset(data_, 0, bytes);
  }
  ~HostPages() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;
  unsigned char* data() const { return data_; }

 private:
  std::size_t bytes_;
  unsigned char* data_;
};
