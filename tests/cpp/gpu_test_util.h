// A DeviceMemory for the device cache's tests: host memory whose mapping can
// be held back chunk by chunk, run out of memory at a chosen chunk, fail a
// copy, or run a hook inside a read. The test keeps a handle on the script
// while the cache owns the memory.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/gpu_error.h"
#include "gpu/host_memory.h"

struct MemoryScript {
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t allowed_chunks = std::numeric_limits<std::size_t>::max();    // map() calls let through
  std::size_t out_of_memory_at = std::numeric_limits<std::size_t>::max();  // map() call that fails
  std::size_t map_calls = 0;                                               // map() calls entered
  std::size_t blocked_at = std::numeric_limits<std::size_t>::max();        // call index held back now
  bool fail_copies_in = false;
  std::function<void()> during_copy_out;
  std::vector<std::pair<std::size_t, std::size_t>> mapped;  // (offset, bytes), in call order

  void allow(std::size_t chunks) {
    std::lock_guard lock(mutex);
    allowed_chunks = chunks;
    changed.notify_all();
  }
  // Waits until map() call `index` (0-based) is held back: every chunk
  // before it is mapped and published by the cache.
  void wait_blocked_at(std::size_t index) {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return blocked_at == index; });
  }
};

class ScriptedMemory : public resurgo::gpu::HostMemory {
 public:
  explicit ScriptedMemory(std::shared_ptr<MemoryScript> script) : script_(std::move(script)) {}

  resurgo::gpu::MapResult map(std::size_t offset, std::size_t bytes) override {
    {
      std::unique_lock lock(script_->mutex);
      const std::size_t index = script_->map_calls++;
      if (index >= script_->allowed_chunks) {
        script_->blocked_at = index;
        script_->changed.notify_all();
        script_->changed.wait(lock, [&] { return index < script_->allowed_chunks; });
        script_->blocked_at = std::numeric_limits<std::size_t>::max();
      }
      if (index == script_->out_of_memory_at) return resurgo::gpu::MapResult::kOutOfMemory;
      script_->mapped.emplace_back(offset, bytes);
    }
    return HostMemory::map(offset, bytes);
  }

  void copy_in(std::size_t offset, const void* source, std::size_t bytes) override {
    if (script_->fail_copies_in) throw resurgo::gpu::GpuError("injected copy failure", 0);
    HostMemory::copy_in(offset, source, bytes);
  }

  void copy_out(std::size_t offset, void* target, std::size_t bytes) override {
    if (script_->during_copy_out) script_->during_copy_out();
    HostMemory::copy_out(offset, target, bytes);
  }

 private:
  std::shared_ptr<MemoryScript> script_;
};
