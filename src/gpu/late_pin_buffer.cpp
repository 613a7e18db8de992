#include "gpu/late_pin_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/units.h"
#include "base/clock.h"
#include "core/config_names.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {
constexpr EnumName<LatePinState> kLatePinStateNames[] = {
    {LatePinState::kTouching, "touching"},
    {LatePinState::kPausedForFlush, "paused for a flush"},
    {LatePinState::kWaitingForToken, "waiting for the registration token"},
    {LatePinState::kPinning, "pinning"},
    {LatePinState::kPinned, "pinned"},
    {LatePinState::kPinFailed, "pin failed"},
    {LatePinState::kNotPinned, "not pinned"},
    {LatePinState::kStopped, "stopped"}};
}  // namespace

const char* to_string(LatePinState state) { return name_in(kLatePinStateNames, state); }

}  // namespace resurgo

namespace resurgo::gpu {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;


bool settled(LatePinState state) {
  return state == LatePinState::kPinned || state == LatePinState::kPinFailed || state == LatePinState::kNotPinned ||
         state == LatePinState::kStopped;
}

}  // namespace

LatePinBuffer::LatePinBuffer(LatePinOptions options, std::unique_ptr<HostPinner> pinner, const Logger& log)
    : options_(std::move(options)),
      pinner_(std::move(pinner)),
      log_(log),
      strategy_(options_.touch == TouchSetting::kSequential ? TouchStrategy::kSequential : TouchStrategy::kConcurrent) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  step_ = options_.touch_step;
  if (options_.capacity == 0 || step_ == 0 || step_ % page != 0) {
    throw InvalidArgumentError("host buffer: capacity " + std::to_string(options_.capacity) + " and touch step " +
                               std::to_string(step_) + " must be positive, the step a multiple of the page size (" +
                               std::to_string(page) + " bytes)");
  }
  capacity_ = round_up(options_.capacity, step_);
  piece_ = gpu::pin_piece(*pinner_);
  map();
  touched_.assign(capacity_ / step_, false);
  untouched_steps_ = touched_.size();
  counters_.capacity = capacity_;
  counters_.pin = options_.pin;
  counters_.touch = options_.touch;
  if (options_.pin == PinPolicy::kEager) {
    populate_and_pin_now();
    return;
  }
  try {
    forerunner_ = std::thread([this] { run_forerunner(); });
  } catch (...) {
    ::munmap(base_, capacity_);
    throw;
  }
}

LatePinBuffer::~LatePinBuffer() {
  stop();
  if (forerunner_.joinable()) forerunner_.join();
  for (auto piece = pinned_pieces_.rbegin(); piece != pinned_pieces_.rend(); ++piece) {
    pinner_->unpin(piece->first, piece->second);
  }
  ::munmap(base_, capacity_);
}

// One huge page more than needed, then the unaligned ends given back: THP
// backs only 2 MiB aligned ranges with huge pages.
void LatePinBuffer::map() {
  const std::size_t bytes = capacity_ + kHugePage;
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    const int error = errno;
    throw StorageError("cannot map a host buffer of " + std::to_string(capacity_) + " bytes: " + std::strerror(error) +
                       "; lower the buffer capacity");
  }
  auto* mapping = static_cast<std::byte*>(memory);
  const auto address = reinterpret_cast<std::uintptr_t>(mapping);
  const std::size_t head = round_up(address, kHugePage) - address;
  base_ = mapping + head;
  if (head > 0) ::munmap(mapping, head);
  if (bytes - head > capacity_) ::munmap(base_ + capacity_, bytes - head - capacity_);
  ::madvise(base_, capacity_, MADV_HUGEPAGE);  // fewer faults, entries and pins; optional
}

std::string LatePinBuffer::populate(std::size_t offset, std::size_t bytes) {
  if (::madvise(base_ + offset, bytes, MADV_POPULATE_WRITE) == 0) return "";
  const int error = errno;
  if (error == EINVAL) {
    return "the kernel has no MADV_POPULATE_WRITE (Linux 5.14 or newer has): flushes fault pages in themselves";
  }
  return "MADV_POPULATE_WRITE of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
         " of the host buffer: " + std::strerror(error);
}

void LatePinBuffer::run_forerunner() {
  while (touch_one_step()) {
  }
  if (options_.pin == PinPolicy::kLazy && !stopping()) {
    pin_all();
    return;
  }
  std::lock_guard lock(mutex_);
  set_state(stop_ ? LatePinState::kStopped : LatePinState::kNotPinned);
}

// Touches the next untouched step ahead of the flushes; false when there is
// nothing left to touch, touching failed, or stop() was called.
bool LatePinBuffer::touch_one_step() {
  if (options_.before_touch_step) options_.before_touch_step();
  std::unique_lock lock(mutex_);
  std::size_t step = kNoStep;
  for (;;) {
    if (stop_ || untouched_steps_ == 0 || !counters_.touch_stopped.empty()) return false;
    if (touching_paused()) {
      set_state(LatePinState::kPausedForFlush);
    } else if ((step = pick_step()) != kNoStep) {
      break;
    } else {
      set_state(LatePinState::kTouching);  // what is left lies under open flushes
    }
    changed_.wait(lock);
  }
  set_state(LatePinState::kTouching);
  ++steps_started_;
  cursor_ = (step + 1) % touched_.size();  // unless a flush moves it meanwhile
  const std::uint64_t flushes_begun = flushes_begun_;
  const bool flush_open = !open_flushes_.empty();
  lock.unlock();

  const Clock::time_point start = Clock::now();
  const std::string failure = populate(step * step_, step_);
  const double seconds = seconds_since(start);

  lock.lock();
  if (!failure.empty()) {
    counters_.touch_stopped = failure;
    lock.unlock();
    log_.warn("host buffer: touching stopped: " + failure +
              (options_.pin == PinPolicy::kLazy ? "; pinning now instead" : ""));
    return false;
  }
  mark_touched(step);
  counters_.touch_seconds += seconds;
  const bool alone = !flush_open && flushes_begun == flushes_begun_ && open_flushes_.empty();
  (alone ? touch_alone_ : touch_concurrent_).add(static_cast<double>(step_), seconds);
  return true;
}

void LatePinBuffer::populate_and_pin_now() {
  const Clock::time_point start = Clock::now();
  const std::string failure = populate(0, capacity_);
  {
    std::lock_guard lock(mutex_);
    counters_.touch_seconds = seconds_since(start);
    if (failure.empty()) {
      std::fill(touched_.begin(), touched_.end(), true);
      untouched_steps_ = 0;
    } else {
      counters_.touch_stopped = failure;  // the pin faults the pages in itself
    }
  }
  pin_all();
}

// Takes the token when there is one, then pins in pieces of max_piece(),
// checking for stop() between pieces.
void LatePinBuffer::pin_all() {
  RegistrationToken::Hold token;
  try {
    if (options_.token != nullptr) {
      {
        std::lock_guard lock(mutex_);
        set_state(LatePinState::kWaitingForToken);
      }
      const Clock::time_point start = Clock::now();
      token = options_.token->acquire([this] { return stopping(); });
      std::lock_guard lock(mutex_);
      counters_.token_wait_seconds = seconds_since(start);
      if (!token) {
        set_state(LatePinState::kStopped);
        return;
      }
    }
    {
      std::lock_guard lock(mutex_);
      set_state(LatePinState::kPinning);
    }
    for (std::size_t offset = 0; offset < capacity_; offset += piece_) {
      if (stopping()) {
        std::lock_guard lock(mutex_);
        set_state(LatePinState::kStopped);
        return;
      }
      const std::size_t bytes = std::min(piece_, capacity_ - offset);
      const Clock::time_point start = Clock::now();
      pinner_->pin(base_ + offset, bytes);
      pinned_pieces_.emplace_back(base_ + offset, bytes);
      std::lock_guard lock(mutex_);
      counters_.pin_seconds += seconds_since(start);
      counters_.pin_pieces = pinned_pieces_.size();
    }
  } catch (const std::exception& error) {
    pin_failed(error.what());
    return;
  }
  // counters_.pin_seconds is written by this thread only: read without the lock.
  log_.info("host buffer: pinned " + size_text(capacity_) + " with " + pinner_->name() + " in " +
            std::to_string(pinned_pieces_.size()) + " pieces, " + std::to_string(counters_.pin_seconds) + " s");
  std::lock_guard lock(mutex_);
  counters_.pinned = true;
  set_state(LatePinState::kPinned);
}

// Gives back the pieces pinned so far: a partly pinned buffer gains little
// and holds locked memory the user was told is not pinned.
void LatePinBuffer::pin_failed(const std::string& reason) {
  for (auto piece = pinned_pieces_.rbegin(); piece != pinned_pieces_.rend(); ++piece) {
    pinner_->unpin(piece->first, piece->second);
  }
  pinned_pieces_.clear();
  log_.warn("host buffer: cannot pin " + size_text(capacity_) + ": " + reason +
            "; flushes go on into unpinned pages, at a lower bandwidth");
  std::lock_guard lock(mutex_);  // settled once logged: whoever waits for it finds the line written
  counters_.pin_failure = reason;
  counters_.pin_pieces = 0;
  set_state(LatePinState::kPinFailed);
}

void LatePinBuffer::flush_begins(std::size_t offset, std::size_t bytes) {
  if (bytes == 0 || offset > capacity_ || bytes > capacity_ - offset) {
    throw InvalidArgumentError("host buffer: flush of " + std::to_string(bytes) + " bytes at offset " +
                               std::to_string(offset) + " is empty or outside the buffer of " +
                               std::to_string(capacity_) + " bytes");
  }
  std::lock_guard lock(mutex_);
  ++flushes_begun_;
  flush_head_ = (offset + bytes) % capacity_;
  cursor_ = flush_head_ / step_;
  open_flushes_.push_back({offset, bytes, Clock::now(), untouched_bytes_in(offset, bytes), steps_started_});
}

void LatePinBuffer::flush_ends(std::size_t offset, std::size_t bytes) {
  const Clock::time_point end = Clock::now();
  std::lock_guard lock(mutex_);
  const auto flush = std::find_if(open_flushes_.begin(), open_flushes_.end(),
                                  [&](const OpenFlush& f) { return f.offset == offset && f.bytes == bytes; });
  if (flush == open_flushes_.end()) {
    throw StateError("host buffer: flush_ends(" + std::to_string(offset) + ", " + std::to_string(bytes) +
                     ") without a matching flush_begins");
  }
  const double seconds = std::chrono::duration<double>(end - flush->start).count();
  // A step under way when the flush began may end during it (sequential
  // touching pauses at the next step): only a step started meanwhile makes
  // the flush one beside touching.
  const bool beside_touching = steps_started_ != flush->steps_started;
  if (!counters_.pinned) {  // pinned pages are another rate, which the model does not need
    const auto flushed = static_cast<double>(bytes);
    if (flush->untouched_bytes == bytes) {
      flush_untouched_.add(flushed, seconds);
    } else if (flush->untouched_bytes == 0) {
      (beside_touching ? flush_concurrent_ : flush_touched_).add(flushed, seconds);
    }  // a flush into both kinds of pages is no clean sample of either
  }
  ++counters_.flushes;
  if (flush->untouched_bytes > 0) {
    ++counters_.flushes_to_untouched;
    counters_.bytes_flushed_to_untouched += flush->untouched_bytes;
  }
  for (std::size_t step = round_up(offset, step_) / step_; (step + 1) * step_ <= offset + bytes; ++step) {
    mark_touched(step);
  }
  open_flushes_.erase(flush);
  changed_.notify_all();
}

void LatePinBuffer::checkpoint_taken(std::size_t bytes, double compute_seconds) {
  if (!std::isfinite(compute_seconds) || compute_seconds < 0) {
    throw InvalidArgumentError("host buffer: compute time " + std::to_string(compute_seconds) +
                               " s before a checkpoint is negative or not finite");
  }
  std::unique_lock lock(mutex_);
  ++counters_.checkpoints;
  checkpoint_bytes_sum_ += static_cast<double>(bytes);
  compute_seconds_sum_ += compute_seconds;
  const TouchRates measured = measured_rates();
  const bool touching = options_.pin != PinPolicy::kEager && untouched_steps_ > 0 && counters_.touch_stopped.empty();
  if (!touching || checkpoint_bytes_sum_ <= 0 || probing() || !measured.enough_to_decide()) return;
  const auto checkpoints = static_cast<double>(counters_.checkpoints);
  TouchModelInputs inputs;
  inputs.rates = measured;
  inputs.checkpoint_bytes = checkpoint_bytes_sum_ / checkpoints;
  inputs.compute_seconds = compute_seconds_sum_ / checkpoints;
  inputs.untouched_bytes = static_cast<double>(untouched_steps_ * step_);
  inputs.touched_ahead_bytes = static_cast<double>(touched_ahead_bytes());
  inputs.flushes_overlap_compute = options_.flushes_overlap_compute;
  TouchDecision decision = choose_touch_strategy(inputs);
  const bool changed = !counters_.decision || counters_.decision->strategy != decision.strategy;
  if (options_.touch == TouchSetting::kAuto && strategy_ != decision.strategy) {
    strategy_ = decision.strategy;
    changed_.notify_all();
  }
  const std::string line = "host buffer: " + decision.describe() +
                           (options_.touch == TouchSetting::kAuto
                                ? ""
                                : std::string("; touch = ") + to_string(options_.touch) + " is set and stays");
  counters_.decision = std::move(decision);
  lock.unlock();
  if (changed) {
    log_.info(line);
  } else {
    log_.debug(line);
  }
}

// Each strategy measures one of the two flush rates into touched pages:
// sequential Ft, concurrent Fc; the other could only be derived (and the
// sharing rule guesses it badly where touching and flushing run on cores of
// their own). So before its first decision `auto` runs the strategy whose
// rate is missing, for a checkpoint or more (at most kMostProbes), and the
// model then decides from both measured.
bool LatePinBuffer::probing() {
  if (options_.touch != TouchSetting::kAuto || counters_.decision || counters_.checkpoints > kMostProbes) return false;
  TouchStrategy probe = TouchStrategy::kConcurrent;
  if (flush_concurrent_.seconds > 0) {
    if (flush_touched_.seconds > 0) return false;
    probe = TouchStrategy::kSequential;
  }
  if (strategy_ != probe) {
    strategy_ = probe;
    changed_.notify_all();
  }
  return true;
}

bool LatePinBuffer::pinned() const {
  std::lock_guard lock(mutex_);
  return counters_.pinned;
}

bool LatePinBuffer::wait_pinned() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return settled(counters_.state); });
  return counters_.pinned;
}

void LatePinBuffer::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
}

LatePinStats LatePinBuffer::stats() const {
  std::lock_guard lock(mutex_);
  LatePinStats out = counters_;
  out.strategy = strategy_;
  out.touched_bytes = (touched_.size() - untouched_steps_) * step_;
  out.measured = measured_rates();
  return out;
}

void LatePinBuffer::set_state(LatePinState state) {
  if (counters_.state == state) return;
  counters_.state = state;
  changed_.notify_all();
}

bool LatePinBuffer::touching_paused() const {
  return strategy_ == TouchStrategy::kSequential && !open_flushes_.empty();
}

// The first untouched step from the cursor on (wrapping around) that no open
// flush covers: the flush touches those itself.
std::size_t LatePinBuffer::pick_step() const {
  const std::size_t steps = touched_.size();
  for (std::size_t i = 0; i < steps; ++i) {
    const std::size_t step = (cursor_ + i) % steps;
    if (!touched_[step] && !under_open_flush(step)) return step;
  }
  return kNoStep;
}

bool LatePinBuffer::under_open_flush(std::size_t step) const {
  const std::size_t begin = step * step_;
  return std::any_of(open_flushes_.begin(), open_flushes_.end(),
                     [&](const OpenFlush& f) { return f.offset < begin + step_ && begin < f.offset + f.bytes; });
}

void LatePinBuffer::mark_touched(std::size_t step) {
  if (touched_[step]) return;
  touched_[step] = true;
  --untouched_steps_;
}

std::size_t LatePinBuffer::untouched_bytes_in(std::size_t offset, std::size_t bytes) const {
  std::size_t untouched = 0;
  for (std::size_t step = offset / step_; step * step_ < offset + bytes; ++step) {
    if (touched_[step]) continue;
    const std::size_t begin = std::max(offset, step * step_);
    const std::size_t end = std::min(offset + bytes, (step + 1) * step_);
    untouched += end - begin;
  }
  return untouched;
}

// Touched bytes from where the next flush likely starts up to the first
// untouched step.
std::size_t LatePinBuffer::touched_ahead_bytes() const {
  const std::size_t steps = touched_.size();
  std::size_t ahead = 0;
  while (ahead < steps && touched_[(flush_head_ / step_ + ahead) % steps]) ++ahead;
  return ahead * step_;
}

TouchRates LatePinBuffer::measured_rates() const {
  TouchRates rates;
  rates.touch_alone = touch_alone_.rate();
  rates.touch_concurrent = touch_concurrent_.rate();
  rates.flush_touched = flush_touched_.rate();
  rates.flush_untouched = flush_untouched_.rate();
  rates.flush_concurrent = flush_concurrent_.rate();
  return rates;
}

bool LatePinBuffer::stopping() const {
  std::lock_guard lock(mutex_);
  return stop_;
}

}  // namespace resurgo::gpu
