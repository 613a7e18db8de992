// Large scratch buffers for moving a matrix's elements (matrix_io.cpp):
// written whole before they are read, so left uninitialized (zeroing
// hundreds of MiB first costs a pass), and from 2 MiB up backed by
// transparent huge pages where the kernel offers them on request, since a
// first touch of 4 KiB pages costs more than the copy into them on a
// virtual machine. The messages backend's local array is one too, zeroed
// explicitly (a value given to the constructor is copied in): bins add
// all over it, where huge pages spare a TLB miss per element; and so are
// the values update() copies into its queue (update_queue.h), left
// uninitialized: the copy writes them.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

namespace resurgo {

template <typename T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  ScratchAllocator() = default;
  template <typename U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>().allocate(count);
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* memory = std::aligned_alloc(kHugePage, rounded);
    if (memory == nullptr) throw std::bad_alloc();
    ::madvise(memory, rounded, MADV_HUGEPAGE);  // a hint: without huge pages the buffer works as well
    return static_cast<T*>(memory);
  }
  void deallocate(T* memory, std::size_t count) noexcept {
    if (count * sizeof(T) < kHugePage) {
      std::allocator<T>().deallocate(memory, count);
    } else {
      std::free(memory);
    }
  }
  template <typename U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;
  }
  template <typename U>
  bool operator==(const ScratchAllocator<U>&) const noexcept {
    return true;
  }
};

template <typename T>
using ScratchBuffer = std::vector<T, ScratchAllocator<T>>;

}  // namespace resurgo
