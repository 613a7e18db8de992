#include "capture/device_staging.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "base/clock.h"
#include "gpu/gpu_error.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// The eager pin waits for the token inside a checkpoint: it gives up after
// buffer.pin_token_timeout and the copies go on into unpinned memory (the
// buffer logs why). The lazy pin waits in the background, as long as it takes.
std::unique_ptr<gpu::RegistrationToken> node_token(const Config& config) {
  if (config.buffer.pin_token_dir.empty()) return nullptr;
  const double seconds = config.buffer.pin_token_timeout;
  const bool waits_for_ever = config.buffer.pin != PinPolicy::kEager || seconds >= 1e12;  // past what ms hold
  const std::chrono::milliseconds patience =
      waits_for_ever ? gpu::RegistrationToken::kForever
                     : std::chrono::ceil<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
  return std::make_unique<gpu::RegistrationToken>(config.buffer.pin_token_dir, "pin", patience);
}

gpu::LatePinOptions options_of(const Config& config, std::uint64_t capacity, gpu::RegistrationToken* token) {
  gpu::LatePinOptions options;
  options.capacity = capacity;
  options.pin = config.buffer.pin;
  options.touch = config.buffer.touch;
  options.token = token;
  return options;
}

}  // namespace

DeviceStaging::DeviceStaging(const Config& config, std::uint64_t capacity, std::unique_ptr<gpu::HostPinner> pinner,
                             const Logger& log)
    : token_(node_token(config)),
      buffer_(options_of(config, capacity, token_.get()), std::move(pinner), log),
      ring_(buffer_.capacity()),
      log_(log) {}

DeviceStaging::~DeviceStaging() = default;

std::unique_ptr<DeviceStaging::Block> DeviceStaging::stage(std::uint64_t bytes, const Fill& fill) {
  if (bytes > ring_.capacity()) {
    if (!warned_too_large_.exchange(true)) {
      log_.warn("a version's " + std::to_string(bytes) + " bytes of device regions exceed the host buffer of " +
                std::to_string(ring_.capacity()) + " bytes: such versions are staged in memory of their own, "
                "unpinned (raise buffer.capacity)");
    }
    auto own = std::make_unique_for_overwrite<std::byte[]>(bytes);
    fill(0, own.get(), bytes);
    std::byte* data = own.get();
    return std::make_unique<Block>(nullptr, 0, std::move(own), data);
  }
  const std::uint64_t offset = ring_.allocate(bytes);
  auto block = std::make_unique<Block>(this, offset, nullptr, buffer_.data() + offset);
  buffer_.flush_begins(offset, bytes);
  try {
    gpu::for_each_pin_piece(offset, bytes, buffer_.pin_piece(), [&](std::uint64_t done, std::uint64_t length) {
      fill(done, block->data() + done, length);
    });
  } catch (...) {
    buffer_.flush_ends(offset, bytes);
    throw;
  }
  buffer_.flush_ends(offset, bytes);
  return block;
}

void DeviceStaging::checkpoint_taken(std::uint64_t bytes, double compute_seconds) {
  buffer_.checkpoint_taken(bytes, compute_seconds);
}

DeviceStaging::Block::~Block() {
  if (owner_ != nullptr) owner_->ring_.release(offset_);
}

ForkStaging::ForkStaging(std::unique_ptr<gpu::HostPinner> pinner, const Logger& log)
    : pinner_(std::move(pinner)),
      piece_(pinner_ ? gpu::pin_piece(*pinner_) : std::numeric_limits<std::uint64_t>::max()),
      log_(log) {}

ForkStaging::~ForkStaging() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  requested_.notify_all();
  if (preparer_.joinable()) preparer_.join();
  for (Memory& half : halves_) unmap(half);
}

void ForkStaging::map(Memory& memory, std::uint64_t bytes) {
  const auto page = static_cast<std::uint64_t>(::getpagesize());
  const std::uint64_t mapped = (bytes + page - 1) / page * page;
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) {
    throw StorageError("cannot map " + std::to_string(mapped) + " bytes of host memory to drain device and managed "
                       "regions into before forking: " + std::strerror(errno) +
                       "; free host memory, or use capture.mode = \"copy\"");
  }
  ::madvise(data, mapped, MADV_DONTFORK);  // refused only for memory that is not ours: it is
  memory.data = static_cast<std::byte*>(data);
  memory.bytes = mapped;
  pin(memory);
}

void ForkStaging::pin(Memory& memory) {
  if (!pinner_) return;
  try {
    for (; memory.pinned < memory.bytes; memory.pinned += std::min(piece_, memory.bytes - memory.pinned)) {
      pinner_->pin(memory.data + memory.pinned, std::min(piece_, memory.bytes - memory.pinned));
    }
  } catch (const gpu::GpuError& error) {
    if (!warned_unpinned_.exchange(true)) {
      log_.warn(std::string("the host memory device regions are drained into before a fork stays partly pageable, "
                            "so the drain runs slower: ") + error.what());
    }
  }
}

void ForkStaging::unmap(Memory& memory) {
  if (memory.data == nullptr) return;
  for (std::uint64_t at = 0; at < memory.pinned; at += piece_) {
    pinner_->unpin(memory.data + at, std::min(piece_, memory.pinned - at));
  }
  ::munmap(memory.data, memory.bytes);
  memory.data = nullptr;
  memory.bytes = 0;
  memory.pinned = 0;
}

int ForkStaging::usable_half() const {
  const auto usable = [&](int index) { return !halves_[index].busy && !halves_[index].preparing; };
  return usable(next_) ? next_ : usable(1 - next_) ? 1 - next_ : -1;
}

ForkStaging::Half ForkStaging::acquire(std::uint64_t bytes, CaptureTimes& times) {
  std::unique_lock lock(mutex_);
  if (usable_half() < 0) {
    const bool preparing = halves_[0].preparing || halves_[1].preparing;
    const Clock::time_point started = Clock::now();
    released_.wait(lock, [&] { return usable_half() >= 0; });
    (preparing ? times.first_touch_seconds : times.backpressure_seconds) += seconds_since(started);
  }
  const int index = usable_half();
  Memory& half = halves_[index];
  half.busy = true;
  next_ = 1 - index;
  if (half.bytes < bytes) {
    lock.unlock();
    const Clock::time_point started = Clock::now();
    try {
      unmap(half);
      map(half, bytes);
    } catch (...) {
      release(index);
      throw;
    }
    times.first_touch_seconds += seconds_since(started);
    lock.lock();
  }
  prepare_other(index, bytes);
  return Half{index, half.data};
}

void ForkStaging::prepare_other(int taken, std::uint64_t bytes) {
  Memory& other = halves_[1 - taken];
  if (other.busy || other.preparing || other.bytes >= bytes) return;
  other.preparing = true;
  request_ = {1 - taken, bytes};
  if (!preparer_.joinable()) preparer_ = std::thread([this] { prepare_requests(); });
  requested_.notify_all();
}

// The preparer lives as long as the staging, waiting between requests: a
// thread that ended and was not joined yet when the application forks
// shows in the child as a leaked thread (ThreadSanitizer fails it).
// A failed preparation leaves the half unmapped: the acquire that takes it
// maps it again, and says why when that fails too.
void ForkStaging::prepare_requests() {
  std::unique_lock lock(mutex_);
  for (;;) {
    requested_.wait(lock, [&] { return stopping_ || request_.half >= 0; });
    if (stopping_) return;
    Memory& half = halves_[request_.half];
    const std::uint64_t bytes = request_.bytes;
    request_ = {};
    lock.unlock();
    try {
      unmap(half);
      map(half, bytes);
    } catch (const std::exception& error) {
      log_.debug(std::string("preparing the other half of the fork staging failed: ") + error.what());
    }
    lock.lock();
    half.preparing = false;
    released_.notify_all();
  }
}

void ForkStaging::release(int half) {
  {
    std::lock_guard lock(mutex_);
    halves_[half].busy = false;
  }
  released_.notify_all();
}

// The half's memory is not remapped while it is busy: no lock needed.
ForkStaging::Sharing::Sharing(const ForkStaging& staging, int index) : staging_(staging), index_(index) {
  const Memory& half = staging_.halves_[index_];
  if (::madvise(half.data, half.bytes, MADV_DOFORK) != 0) {
    throw StorageError("cannot give the " + std::to_string(half.bytes) + " bytes device and managed regions were "
                       "drained into to the forked writer (madvise MADV_DOFORK: " + std::strerror(errno) +
                       "); use capture.mode = \"copy\"");
  }
}

ForkStaging::Sharing::~Sharing() {
  const Memory& half = staging_.halves_[index_];
  ::madvise(half.data, half.bytes, MADV_DONTFORK);
}

}  // namespace resurgo
