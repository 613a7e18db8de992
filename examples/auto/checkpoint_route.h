// Where the mini-apps of examples/auto send their checkpoints: harness.h's
// --in-memory and --synchronous, tealeaf_mpi's --checkpoints. bench/auto.py
// compares the routes.
#pragma once

#include <cstdint>

#include "resurgo/config.hpp"

// One page: every checkpoint is larger, so the store writes it from the
// application's memory before checkpoint() returns (docs/config.md, buffer.capacity).
inline constexpr std::uint64_t kSynchronousBufferBytes = 4096;

// in_memory: L1 only (the runtime writes the newest version to L2 on
// SIGTERM/SIGINT); synchronous: the checkpoint is on L2 before the
// application goes on. Neither: L2 through the store's background pipeline.
inline void route_checkpoints(resurgo::Config& config, bool in_memory, bool synchronous) {
  if (in_memory) {
    config.memory.every = 1;
    config.memory.keep = 1;
    config.local.every = 0;
  }
  if (synchronous) config.buffer.capacity = kSynchronousBufferBytes;
}
