// Copy capture: checkpoint() copies the protected bytes into a block of the
// L1 host buffer and returns; the pipeline writes the block and releases it.
// A state larger than the buffer is captured synchronously: the writer reads
// the application's memory and checkpoint() waits until the version is written.
#pragma once

#include <memory>

#include "capture/capture.h"
#include "tier/host_buffer.h"

namespace resurgo {

class CopyCapture final : public Capture {
 public:
  explicit CopyCapture(const CaptureContext& context) : context_(context) {}

  const char* mode(std::uint64_t state_bytes) const override;
  void resize(std::uint64_t state_bytes) override;
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;
  void restarting(bool restarting) override;

  // Whether `state_bytes` fits the buffer (else the capture is synchronous).
  bool fits(std::uint64_t state_bytes) const;

 private:
  std::uint64_t wanted_capacity(std::uint64_t state_bytes) const;
  void fault_in(std::byte* block, std::uint64_t bytes, CaptureTimes& times);
  void copy(const std::vector<Region>& regions, std::byte* block, CaptureTimes& times);

  CaptureContext context_;
  std::shared_ptr<HostBuffer> buffer_;
  bool warned_synchronous_ = false;
};

}  // namespace resurgo
