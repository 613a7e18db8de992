// What the device regions' caches report (Store::device_stats(),
// docs/gpu.md): the L0 device cache, and the staging buffer that pins late
// with the touch model's choice and its inputs (HiPC'22 cache-allocation
// paper, section IV; docs/gpu_late_pin.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "resurgo/config.hpp"

namespace resurgo {

// The L0 device cache (gpu/device_cache.h).
struct DeviceCacheStats {
  int device = 0;                 // the ordinal of the device it is on (device.ordinal)
  std::size_t capacity = 0;       // reserved bytes
  std::size_t mapped = 0;         // bytes usable now
  std::size_t used = 0;           // bytes held by cached versions
  std::size_t versions = 0;       // cached versions
  std::uint64_t evicted = 0;      // versions evicted so far
  std::uint64_t bypassed = 0;     // captures refused as too large
  bool growth_done = false;       // fully mapped, or stopped growing
  std::string growth_stopped;     // why mapping stopped early; empty if it did not
  double mapping_seconds = 0;     // from open to the end of mapping (once growth_done)
  double map_wait_seconds = 0;    // total over captures
  double flush_wait_seconds = 0;  // total over captures
  // The backward pass (Store::prefetch; docs/adjoint.md, "Backward pass on the device"):
  std::uint64_t prefetched = 0;              // versions staged into L0 from host memory or files
  std::uint64_t prefetch_too_large = 0;      // larger than L0: restored from host memory instead
  std::uint64_t prefetch_failed = 0;         // a copy into L0 failed: restored from the next level
  std::uint64_t restored_from_prefetch = 0;  // restarts that copied a staged version device to device
};

// The touch model (gpu/touch_model.h): its strategies, inputs and choice.
enum class TouchStrategy {
  kConcurrent,  // touch all the time, beside flushes
  kSequential,  // pause touching while a flush runs
};

// Bandwidths in bytes per second, as measured by the buffer; 0 where there
// was no sample yet (a strategy never sees some of them: sequential touching
// never runs beside a flush).
struct TouchRates {
  double touch_alone = 0;       // T:  the forerunner touching, no flush running
  double touch_concurrent = 0;  // Tc: touching while a flush runs
  double flush_touched = 0;     // Ft: a flush into touched pages, no touching meanwhile
  double flush_untouched = 0;   // Fu: a flush into untouched pages
  double flush_concurrent = 0;  // Fc: a flush into touched pages while touching runs

  // T and at least one flush rate: the least complete_rates() can work from.
  bool enough_to_decide() const;
};

struct TouchModelInputs {
  TouchRates rates;                // measured (0: no sample yet)
  double checkpoint_bytes = 0;     // S: bytes each upcoming flush writes (> 0)
  double compute_seconds = 0;      // C: compute between two checkpoints
  double untouched_bytes = 0;      // U: bytes of the buffer not touched yet
  double touched_ahead_bytes = 0;  // L: touched bytes right after where the next flush starts
  // True when a flush runs while the application computes the next
  // iteration (the Store's asynchronous flush): the idle time is then C - D
  // for a flush of D seconds. False when the application waits for each
  // flush (the host benchmark): the idle time is C.
  bool flushes_overlap_compute = true;
};

struct TouchEstimate {
  double flush_seconds = 0;  // flush time over the horizon
  std::uint64_t iterations_to_touch_all = 0;
};

struct TouchDecision {
  TouchStrategy strategy = TouchStrategy::kConcurrent;
  TouchModelInputs inputs;               // as given
  TouchRates rates;                      // completed: measured, or derived as `derived` says
  std::string derived;                   // "Tc, Fc" etc.; empty when every rate was measured
  std::uint64_t horizon_iterations = 0;  // both estimates cover this many flushes
  TouchEstimate concurrent;
  TouchEstimate sequential;

  // One line for the log: the choice, both estimates and every input.
  std::string describe() const;
};

// The staging buffer that pins late (gpu/late_pin_buffer.h).
enum class LatePinState {
  kTouching,         // pages remain untouched
  kPausedForFlush,   // sequential strategy: a flush is open
  kWaitingForToken,  // every page touched; another holder pins now
  kPinning,
  kPinned,     // settled
  kPinFailed,  // settled: stats().pin_failure says why; flushes go to unpinned pages
  kNotPinned,  // settled: policy off, every page touched (or touching stopped)
  kStopped,    // settled: stop() or destruction came first
};

struct LatePinStats {
  std::size_t capacity = 0;
  PinPolicy pin = PinPolicy::kLazy;
  TouchSetting touch = TouchSetting::kAuto;
  LatePinState state = LatePinState::kTouching;
  TouchStrategy strategy = TouchStrategy::kConcurrent;  // in force now
  std::size_t touched_bytes = 0;                        // by the forerunner or by flushes
  double touch_seconds = 0;   // the forerunner's time in MADV_POPULATE_WRITE (eager: the populate)
  std::string touch_stopped;  // why touching stopped early; empty if it did not
  bool pinned = false;
  std::size_t pin_pieces = 0;  // pinned now
  double pin_seconds = 0;      // in the pinner's calls
  double token_wait_seconds = 0;
  std::string pin_failure;                 // the pinner's error; empty if none
  std::uint64_t flushes = 0;               // ended
  std::uint64_t flushes_to_untouched = 0;  // found untouched pages in their range
  std::size_t bytes_flushed_to_untouched = 0;
  std::uint64_t checkpoints = 0;
  TouchRates measured;                    // the model's inputs measured so far (0: no sample)
  std::optional<TouchDecision> decision;  // the model's latest, with its inputs and both estimates
};

// Store::device_stats(): each part is absent until the store has it.
struct DeviceStats {
  std::optional<DeviceCacheStats> cache;  // L0: with device.capacity > 0 and a usable backend
  std::optional<LatePinStats> staging;    // made at the first checkpoint of a device region
};

// "concurrent", "touching", ... (to_string of PinPolicy and TouchSetting:
// resurgo/config.hpp).
const char* to_string(TouchStrategy strategy);
const char* to_string(LatePinState state);

}  // namespace resurgo
