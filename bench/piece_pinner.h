// A backend's pinner whose pieces are at most `piece` bytes (a benchmark's
// --pin-piece-mib): short runs on the fake CUDA driver whose copies then
// cross piece bounds, as the copies of a real run cross the 1 GiB pieces
// (the driver refuses a copy over two registrations: gpu_driver_probe).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "gpu/host_pinner.h"

namespace resurgo::gpu {

class PiecePinner : public HostPinner {
 public:
  PiecePinner(std::unique_ptr<HostPinner> pinner, std::size_t piece) : pinner_(std::move(pinner)), piece_(piece) {}
  std::string name() const override { return pinner_->name(); }
  std::size_t max_piece() const override { return std::min(piece_, pinner_->max_piece()); }
  void pin(void* data, std::size_t bytes) override { pinner_->pin(data, bytes); }
  void unpin(void* data, std::size_t bytes) noexcept override { pinner_->unpin(data, bytes); }

 private:
  std::unique_ptr<HostPinner> pinner_;
  std::size_t piece_;
};

// `pinner` itself when `piece` is 0 (no --pin-piece-mib), else in pieces of
// at most `piece` bytes.
inline std::unique_ptr<HostPinner> in_pieces_of(std::unique_ptr<HostPinner> pinner, std::size_t piece) {
  if (piece == 0) return pinner;
  return std::make_unique<PiecePinner>(std::move(pinner), piece);
}

}  // namespace resurgo::gpu
