// Pins (page-locks) host memory so that device-to-host copies into it run at
// full speed: a copy into pageable memory goes through the driver's staging
// buffers at about half the bandwidth (HiPC'22 cache-allocation paper,
// section IV-A: 12 against 25 GB/s on an A100). Two implementations: the
// CUDA driver's registration (cuda_host_pinner.h, with the CUDA headers) and
// mlock, the host-only stand-in with the same cost profile (it faults in and
// locks every page), used by the tests and the host benchmark.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace resurgo::gpu {

class HostPinner {
 public:
  virtual ~HostPinner() = default;

  // "mlock", "cuMemHostRegister": for logs and stats.
  virtual std::string name() const = 0;
  // The most bytes one pin() call may take; callers pin larger ranges in
  // pieces (each piece then unpinned on its own).
  virtual std::size_t max_piece() const = 0;
  // Pins [data, data + bytes), bytes <= max_piece(). Throws GpuError naming
  // the call, the range and the reason.
  virtual void pin(void* data, std::size_t bytes) = 0;
  // Undoes one successful pin() of exactly this range.
  virtual void unpin(void* data, std::size_t bytes) noexcept = 0;
};

// "1073741824 bytes at 0x7f3a40000000": the range named in pin errors.
std::string describe_pin_range(const void* data, std::size_t bytes);

// The bytes of each pin() a buffer is pinned in: max_piece() rounded down to
// whole pages (at least one).
std::size_t pin_piece(const HostPinner& pinner);

// Calls copy(done, length) for each part of [offset, offset + bytes) that
// lies within one piece of `piece` bytes (pieces counted from 0, `done`
// from offset): the driver refuses a copy over two registrations
// (gpu_driver_probe), so a copy into or out of memory pinned in pieces is
// cut at their bounds.
template <typename Copy>
void for_each_pin_piece(std::uint64_t offset, std::uint64_t bytes, std::uint64_t piece, Copy&& copy) {
  for (std::uint64_t done = 0; done < bytes;) {
    const std::uint64_t length = std::min(bytes - done, piece - (offset + done) % piece);
    copy(done, length);
    done += length;
  }
}

// mlock/munlock. Pieces of 256 MiB: mlock has no per-call limit, but a
// buffer stops pinning between pieces when it is destroyed.
std::unique_ptr<HostPinner> make_mlock_pinner();

}  // namespace resurgo::gpu
