// What the device cache needs from the memory under it: one reserved virtual
// range, physical memory mapped into it chunk by chunk, and copies in and
// out. Two implementations: CUDA virtual memory management (cuda_vmm_memory.h)
// and ordinary host memory (host_memory.h), so the cache's logic is tested on
// machines without a GPU.
#pragma once

#include <cstddef>
#include <string>

namespace resurgo::gpu {

enum class MapResult { kMapped, kOutOfMemory };

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // "cuda-vmm (device 0: NVIDIA H100 80GB HBM3)", "host": for log lines.
  virtual std::string name() const = 0;
  // The ordinal of the device the memory is on (0 for host memory).
  virtual int device() const = 0;
  // Chunk sizes and offsets given to map() are multiples of this.
  virtual std::size_t granularity() const = 0;

  // Reserves `bytes` (a multiple of granularity()) of address space, backed
  // by nothing yet. Called once, before anything else but the two above.
  virtual void reserve(std::size_t bytes) = 0;
  // Backs [offset, offset + bytes) of the range with memory the copies can
  // use. Called from the cache's mapping thread, in ascending order, while
  // copies run on mapped parts. kOutOfMemory when the memory is not there;
  // throws on any other failure.
  virtual MapResult map(std::size_t offset, std::size_t bytes) = 0;

  // Enqueues a copy of `bytes` from `source` (device or host memory) to
  // [offset, offset + bytes) of the range, on the capture stream.
  virtual void copy_in(std::size_t offset, const void* source, std::size_t bytes) = 0;
  // Waits for every copy enqueued by copy_in().
  virtual void wait_copies_in() = 0;
  // Copies [offset, offset + bytes) of the range to `target` (device or host
  // memory) and waits for it, on a stream of its own so that reading a
  // version does not wait for a capture.
  virtual void copy_out(std::size_t offset, void* target, std::size_t bytes) = 0;
};

}  // namespace resurgo::gpu
