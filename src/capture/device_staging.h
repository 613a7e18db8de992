// The host memory device regions are staged in on their way from the device
// to the levels: the staging buffer that pins late (gpu/late_pin_buffer.h,
// the HiPC'22 cache paper's section IV), with its blocks allocated first in,
// first out (capture/block_ring.h) as versions are written in that order. A
// version larger than the whole buffer is staged in memory of its own
// (logged once).
//
// Thread safety: every member may be called from any thread (the
// application thread stages versions that bypass L0, the first level's
// worker those from L0).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "base/log.h"
#include "gpu/host_pinner.h"
#include "gpu/late_pin_buffer.h"
#include "gpu/registration_token.h"
#include "resurgo/config.hpp"
#include "capture/block_ring.h"
#include "capture/snapshot.h"

namespace resurgo {

class DeviceStaging {
 public:
  // A buffer of `capacity` bytes pinned as `config.buffer` says, through
  // `pinner` (gpu::open_host_pinner: cuMemHostRegister, or mlock for the
  // host backend).
  DeviceStaging(const Config& config, std::uint64_t capacity, std::unique_ptr<gpu::HostPinner> pinner,
                const Logger& log);
  ~DeviceStaging();
  DeviceStaging(const DeviceStaging&) = delete;
  DeviceStaging& operator=(const DeviceStaging&) = delete;

  // Copies bytes [offset, offset + bytes) of a version's device regions
  // (laid end to end) to `target`: a device-to-host copy.
  using Fill = std::function<void(std::uint64_t offset, std::byte* target, std::uint64_t bytes)>;

  // Host memory of `bytes`, filled by `fill` (timed as a flush of the
  // buffer), held until the returned block is destroyed. Waits while older
  // versions hold the buffer's space. `fill` is called once per pin piece
  // the block covers, never across a piece boundary
  // (gpu::LatePinBuffer::pin_piece says why).
  class Block;
  std::unique_ptr<Block> stage(std::uint64_t bytes, const Fill& fill);

  // The application took a checkpoint of `bytes` of device regions after
  // `compute_seconds` of compute: the buffer's touch model decides again.
  void checkpoint_taken(std::uint64_t bytes, double compute_seconds);
  gpu::LatePinStats stats() const { return buffer_.stats(); }

 private:
  std::unique_ptr<gpu::RegistrationToken> token_;  // before buffer_: it outlives it
  gpu::LatePinBuffer buffer_;
  BlockRing ring_;
  const Logger& log_;
  std::atomic<bool> warned_too_large_{false};
};

// The host memory device and managed regions are drained into under
// capture.mode = "fork" (device_regions.h, CRUM's drain-then-fork): two
// halves, each holding one version until its forked writer is done with it
// and the version is released, so that the parent drains the next version
// into the other half while a child reads its own: a child's half is never
// written while it lives.
//
// Each half is shared anonymous memory (MAP_SHARED), pinned through the
// store's pinner once mapped. Shared, so that a fork copies none of it and
// leaves nothing copy-on-write: the child reads the parent's pages, which
// the parent does not write until the child is done (private pages pinned
// for DMA would be copied whole at fork by the kernel, and unpinned ones
// write-protected in the parent until its next drain faults them back).
// Pinned, so that the drain runs at DMA speed: a copy into pageable memory
// measured 1.2 GB/s for 1 GiB of managed memory on an H100
// (bench/results/crum_h100_pageable.md). A pin that fails leaves the half pageable
// (logged once). The halves are advised MADV_DONTFORK but for the half
// given to the child forked while a Sharing lives.
//
// Mapping and pinning a half faults in and locks every page of it: only the
// first checkpoint pays that on the application's path (the half it takes
// is mapped there); the other half is prepared to the same size by a thread
// of the staging's own meanwhile.
//
// Thread safety: acquire on the application thread, release from any.
class ForkStaging {
 public:
  // `pinner`: gpu::open_host_pinner's (cuMemHostRegister, or mlock for the
  // host backend); null: pageable halves.
  ForkStaging(std::unique_ptr<gpu::HostPinner> pinner, const Logger& log);
  ~ForkStaging();
  ForkStaging(const ForkStaging&) = delete;
  ForkStaging& operator=(const ForkStaging&) = delete;

  struct Half {
    int index;
    std::byte* data;
  };
  // A free half of at least `bytes`, waiting while both hold versions in
  // flight. Adds the wait for a version's half to `times.backpressure_seconds`
  // and the mapping and pinning of a half (or the wait for its preparation)
  // to `times.first_touch_seconds`.
  Half acquire(std::uint64_t bytes, CaptureTimes& times);
  // The version in `half` is written (or failed): the half is free again.
  void release(int half);
  // The bytes of each pin of a half, from its start (UINT64_MAX without a
  // pinner): a drain is cut at their bounds (gpu::for_each_pin_piece).
  std::uint64_t piece() const { return piece_; }

  // Gives half `index` to the children forked while it lives; throws
  // StorageError when the kernel refuses (the child could not read it).
  class Sharing {
   public:
    Sharing(const ForkStaging& staging, int index);
    ~Sharing();
    Sharing(const Sharing&) = delete;
    Sharing& operator=(const Sharing&) = delete;

   private:
    const ForkStaging& staging_;
    int index_;
  };

 private:
  struct Memory {
    std::byte* data = nullptr;
    std::uint64_t bytes = 0;   // mapped, whole pages
    std::uint64_t pinned = 0;  // pinned from data on, in pieces of piece_
    bool busy = false;         // holds a version
    bool preparing = false;    // being mapped by preparer_
  };
  int usable_half() const;  // under mutex_: the free half to take, or -1
  void map(Memory& memory, std::uint64_t bytes);
  void pin(Memory& memory);
  void unmap(Memory& memory);
  // Under mutex_: asks preparer_ to map the other half to `bytes` when it is
  // free and smaller.
  void prepare_other(int taken, std::uint64_t bytes);
  void prepare_requests();  // preparer_'s loop

  const std::unique_ptr<gpu::HostPinner> pinner_;
  const std::uint64_t piece_;  // of each pin; UINT64_MAX without a pinner
  const Logger& log_;
  std::atomic<bool> warned_unpinned_{false};
  std::mutex mutex_;
  std::condition_variable released_;
  Memory halves_[2];
  int next_ = 0;  // the half tried first: the older one
  struct Request {
    int half = -1;  // none
    std::uint64_t bytes = 0;
  };
  Request request_;  // for preparer_, under mutex_
  bool stopping_ = false;
  std::condition_variable requested_;
  std::thread preparer_;  // started at the first request
};

class DeviceStaging::Block {
 public:
  Block(DeviceStaging* owner, std::uint64_t offset, std::unique_ptr<std::byte[]> own, std::byte* data)
      : owner_(owner), offset_(offset), own_(std::move(own)), data_(data) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  std::byte* data() const { return data_; }

 private:
  DeviceStaging* owner_;  // null for memory of its own
  std::uint64_t offset_;
  std::unique_ptr<std::byte[]> own_;
  std::byte* data_;
};

}  // namespace resurgo
