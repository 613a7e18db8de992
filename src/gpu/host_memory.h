// DeviceMemory over ordinary host memory: an mmap(PROT_NONE) reservation,
// chunks mapped read-write in place (MAP_FIXED, populated: physical pages are
// taken at map time, as cuMemCreate does), memcpy for the copies. Runs the
// device cache's logic without a GPU; an access to a part not mapped yet
// faults, so a test catches a cache that copies too early.
#pragma once

#include "gpu/device_memory.h"

namespace resurgo::gpu {

class HostMemory : public DeviceMemory {
 public:
  HostMemory() = default;
  ~HostMemory() override;
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  std::string name() const override { return "host"; }
  int device() const override { return 0; }
  std::size_t granularity() const override;
  void reserve(std::size_t bytes) override;
  MapResult map(std::size_t offset, std::size_t bytes) override;
  void copy_in(std::size_t offset, const void* source, std::size_t bytes) override;
  void wait_copies_in() override {}
  void copy_out(std::size_t offset, void* target, std::size_t bytes) override;

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace resurgo::gpu
