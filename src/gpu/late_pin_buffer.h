// The staging buffer that pins late (HiPC'22 cache-allocation paper,
// sections IV-A and IV-B). Pinning a buffer up front costs the first
// checkpoint the whole allocation: every page is faulted in, zeroed and
// locked before the first flush can start. Most of that cost is the faulting,
// not the locking. So the buffer is an ordinary mapping with transparent huge
// pages, device-to-host flushes go to it at once, unpinned, and a forerunner
// thread touches the pages ahead of the flushes; once every page is touched
// the buffer is pinned, in pieces, which then only has to lock pages that are
// there already.
//
// Touching and flushing compete for the host memory bandwidth: the
// forerunner touches either all the time (concurrent) or only while no flush
// is open (sequential); with `touch = auto` a performance model
// (touch_model.h) picks one from the measured touch and flush rates and the
// compute interval, at each checkpoint until every page is touched.
//
// Touching is MADV_POPULATE_WRITE over one step (2 MiB, a huge page) at a
// time: it faults pages in without changing their contents, so it may run
// beside a flush writing the same pages. A flush marks the steps it covered
// as touched (its writes faulted them in). On a kernel without
// MADV_POPULATE_WRITE (Linux < 5.14) touching stops, the flushes fault pages
// in themselves, and the lazy pin starts at once.
//
// Thread safety: every member may be called from any thread. Flushes may
// overlap each other (each bracketed by flush_begins/flush_ends with the same
// range); the bytes are written by the owner, outside any lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "gpu/host_pinner.h"
#include "gpu/registration_token.h"
#include "gpu/touch_model.h"
#include "resurgo/config.hpp"

namespace resurgo::gpu {

// [buffer] pin and touch (config.hpp): lazy pins once every page is touched
// (with the token, when one is given), eager populates and pins the whole
// buffer in the constructor (the traditional baseline), off never pins.
using resurgo::LatePinState;
using resurgo::LatePinStats;
using resurgo::PinPolicy;
using resurgo::TouchSetting;

struct LatePinOptions {
  std::size_t capacity = 0;  // rounded up to whole touch steps
  PinPolicy pin = PinPolicy::kLazy;
  TouchSetting touch = TouchSetting::kAuto;
  // Held while pinning (both lazy and eager) when set; must outlive the buffer.
  RegistrationToken* token = nullptr;
  // Bytes touched at a time: one transparent huge page. A multiple of the
  // page size; the forerunner checks for a flush or stop between steps.
  std::size_t touch_step = std::size_t{2} << 20;
  // See TouchModelInputs: true for asynchronous flushes (the Store's), false
  // when the application waits for each flush.
  bool flushes_overlap_compute = true;
  // Called by the forerunner before each step it may take, under no lock;
  // tests hold it back to step the forerunner one step at a time.
  std::function<void()> before_touch_step;
};

class LatePinBuffer {
 public:
  // Maps the buffer (2 MiB aligned, MADV_HUGEPAGE) and starts the forerunner,
  // or (eager) populates and pins it before returning. A pin that fails is
  // logged once as a warning and leaves the buffer unpinned; it does not
  // throw. Throws InvalidArgumentError for a zero capacity or a touch step
  // that is not a multiple of the page size, StorageError when the mapping
  // fails.
  LatePinBuffer(LatePinOptions options, std::unique_ptr<HostPinner> pinner, const Logger& log);
  // stop(), waits for the forerunner (at most one step or one pin piece),
  // unpins what was pinned and unmaps. Flushes must have ended.
  ~LatePinBuffer();
  LatePinBuffer(const LatePinBuffer&) = delete;
  LatePinBuffer& operator=(const LatePinBuffer&) = delete;

  std::byte* data() { return base_; }
  std::size_t capacity() const { return capacity_; }
  // The buffer is pinned in pieces of this many bytes from data() on, each
  // its own registration. A device-to-host copy must lie within one piece:
  // while pinning, one piece may be registered and the next not yet, and the
  // CUDA driver refuses a copy over memory partly registered
  // (CUDA_ERROR_INVALID_VALUE, documented for every cuMemcpy*); whether it
  // takes a copy spanning two registrations is not documented.
  std::size_t pin_piece() const { return piece_; }

  // The owner brackets each device-to-host flush into [offset, offset +
  // bytes). While one is open the sequential strategy pauses touching (from
  // the next step on); its duration is a sample of the flush rate into
  // touched or untouched pages, beside touching or not. InvalidArgumentError
  // for an empty range or one outside the buffer; StateError from
  // flush_ends without a matching flush_begins.
  void flush_begins(std::size_t offset, std::size_t bytes);
  void flush_ends(std::size_t offset, std::size_t bytes);

  // The application took a checkpoint of `bytes` after `compute_seconds` of
  // compute since the previous one. While pages remain untouched, the model
  // decides again (logged at info when its choice changes; applied when
  // touch = auto). Before its first decision, auto runs each strategy in
  // turn until both flush rates into touched pages are measured (at most 8
  // checkpoints). InvalidArgumentError for a negative or non-finite time.
  void checkpoint_taken(std::size_t bytes, double compute_seconds);

  bool pinned() const;
  // Blocks until the pin is settled (pinned, failed, off, or stopped);
  // returns pinned().
  bool wait_pinned() const;
  // Stops touching and pinning at the next step or piece, without waiting
  // (e.g. while a restart needs the memory bandwidth, or from a test's
  // pinner). Flushes keep working; what was pinned stays pinned.
  void stop();
  LatePinStats stats() const;

 private:
  struct OpenFlush {
    std::size_t offset;
    std::size_t bytes;
    Clock::time_point start;
    std::size_t untouched_bytes;  // at the start
    std::uint64_t steps_started;  // by the forerunner, at the start
  };
  struct RateSum {
    double bytes = 0;
    double seconds = 0;
    void add(double more_bytes, double more_seconds) {
      bytes += more_bytes;
      seconds += more_seconds;
    }
    double rate() const { return seconds > 0 ? bytes / seconds : 0; }
  };
  static constexpr std::size_t kNoStep = static_cast<std::size_t>(-1);
  static constexpr std::uint64_t kMostProbes = 8;  // checkpoints auto may spend measuring before deciding

  void map();
  void run_forerunner();
  bool touch_one_step();
  void populate_and_pin_now();
  void pin_all();
  void pin_failed(const std::string& reason);
  // "" when the range was faulted in, else why not.
  std::string populate(std::size_t offset, std::size_t bytes);
  bool stopping() const;  // takes mutex_

  // Callers hold mutex_.
  void set_state(LatePinState state);
  bool touching_paused() const;
  bool probing();
  std::size_t pick_step() const;
  bool under_open_flush(std::size_t step) const;
  void mark_touched(std::size_t step);
  std::size_t untouched_bytes_in(std::size_t offset, std::size_t bytes) const;
  std::size_t touched_ahead_bytes() const;
  TouchRates measured_rates() const;

  const LatePinOptions options_;
  const std::unique_ptr<HostPinner> pinner_;
  const Logger& log_;
  std::size_t step_ = 0;
  std::size_t piece_ = 0;
  std::size_t capacity_ = 0;
  std::byte* base_ = nullptr;  // 2 MiB aligned
  // Written by the pinning thread only; read after it ended.
  std::vector<std::pair<std::byte*, std::size_t>> pinned_pieces_;

  mutable std::mutex mutex_;  // everything below
  mutable std::condition_variable changed_;
  std::vector<bool> touched_;  // per step
  std::size_t untouched_steps_ = 0;
  std::size_t cursor_ = 0;  // the forerunner looks from this step on
  std::uint64_t steps_started_ = 0;
  std::uint64_t flushes_begun_ = 0;
  std::size_t flush_head_ = 0;  // where the latest flush ended: the next one likely starts there
  std::vector<OpenFlush> open_flushes_;
  TouchStrategy strategy_;
  RateSum touch_alone_, touch_concurrent_, flush_touched_, flush_untouched_, flush_concurrent_;
  double checkpoint_bytes_sum_ = 0;
  double compute_seconds_sum_ = 0;
  bool stop_ = false;
  LatePinStats counters_;
  std::thread forerunner_;
};

}  // namespace resurgo::gpu
