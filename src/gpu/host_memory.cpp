#include "gpu/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpu/gpu_error.h"

namespace resurgo::gpu {

HostMemory::~HostMemory() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

std::size_t HostMemory::granularity() const { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

void HostMemory::reserve(std::size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    throw GpuError("host device cache: cannot reserve " + std::to_string(bytes) +
                       " bytes of address space: " + std::strerror(errno),
                   0);
  }
  base_ = static_cast<std::byte*>(base);
  size_ = bytes;
}

MapResult HostMemory::map(std::size_t offset, std::size_t bytes) {
  void* at = ::mmap(base_ + offset, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0);
  if (at == MAP_FAILED) {
    if (errno == ENOMEM) return MapResult::kOutOfMemory;
    throw GpuError("host device cache: cannot map " + std::to_string(bytes) + " bytes at offset " +
                       std::to_string(offset) + ": " + std::strerror(errno),
                   0);
  }
  return MapResult::kMapped;
}

void HostMemory::copy_in(std::size_t offset, const void* source, std::size_t bytes) {
  std::memcpy(base_ + offset, source, bytes);
}

void HostMemory::copy_out(std::size_t offset, void* target, std::size_t bytes) {
  std::memcpy(target, base_ + offset, bytes);
}

}  // namespace resurgo::gpu
