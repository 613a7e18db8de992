#include "fake_cuda_streams.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace fake_cuda {

std::atomic<std::uint64_t> async_failures{0};
std::atomic<bool> streams_held{false};

std::shared_ptr<Backing> Backing::memfd(std::size_t bytes) {
  const int fd = ::memfd_create("resurgo-fake-cuda", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    return nullptr;
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (data == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  return std::shared_ptr<Backing>(new Backing(static_cast<std::byte*>(data), bytes, fd));
}

std::shared_ptr<Backing> Backing::anonymous(std::size_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  return std::shared_ptr<Backing>(new Backing(static_cast<std::byte*>(data), bytes, -1));
}

Backing::~Backing() {
  ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

bool all_live(const std::vector<Piece>& pieces) {
  return std::all_of(pieces.begin(), pieces.end(), [](const Piece& piece) {
    return piece.mapping == nullptr || piece.mapping->live.load(std::memory_order_relaxed);
  });
}

}  // namespace

CUresult run_copy(const std::vector<Piece>& target, const std::vector<Piece>& source, unsigned char fill) {
  if (!all_live(target) || !all_live(source)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  if (source.empty()) {
    for (const Piece& piece : target) std::memset(piece.data, fill, piece.bytes);
    return CUDA_SUCCESS;
  }
  // Both sides cover the same bytes, cut at different places.
  std::size_t from = 0, from_offset = 0;
  for (const Piece& piece : target) {
    for (std::size_t done = 0; done < piece.bytes;) {
      const Piece& in = source[from];
      const std::size_t bytes = std::min(piece.bytes - done, in.bytes - from_offset);
      std::memcpy(piece.data + done, in.data + from_offset, bytes);
      done += bytes;
      from_offset += bytes;
      if (from_offset == in.bytes) {
        ++from;
        from_offset = 0;
      }
    }
  }
  return CUDA_SUCCESS;
}

std::shared_ptr<Stream> Stream::start() {
  std::shared_ptr<Stream> stream(new Stream());
  // The worker owns the stream too: it outlives its handle while work remains.
  stream->worker_ = std::thread([self = stream] { self->run(); });
  return stream;
}

void Stream::enqueue(Operation operation, Clock::time_point due) {
  std::lock_guard lock(mutex_);
  queue_.push_back({std::move(operation), due});
  ++enqueued_;
  changed_.notify_all();
}

CUresult Stream::synchronize() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = enqueued_;
  changed_.wait(lock, [&] { return completed_ >= target; });
  return error_;
}

void Stream::retire() {
  std::lock_guard lock(mutex_);
  retired_ = true;
  worker_.detach();
  changed_.notify_all();
}

void Stream::run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return !queue_.empty() || retired_; });
      if (queue_.empty()) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    // Polled once due, not locked: a lock shared by the workers would order
    // their copies. Acquire pairs with the release that lets the streams go
    // (fake_cuda_hold_streams), so what the test did before that happens
    // before the operation.
    std::this_thread::sleep_until(next.due);
    while (streams_held.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const CUresult result = next.operation();
    if (result != CUDA_SUCCESS) async_failures.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mutex_);
    if (error_ == CUDA_SUCCESS) error_ = result;
    ++completed_;
    changed_.notify_all();
  }
}

std::uint64_t Event::record() {
  std::lock_guard lock(mutex_);
  return ++recorded_;
}

void Event::reached(std::uint64_t ticket) {
  std::lock_guard lock(mutex_);
  if (ticket <= reached_) return;
  reached_ = ticket;
  when_ = Clock::now();
  changed_.notify_all();
}

void Event::synchronize() {
  std::unique_lock lock(mutex_);
  const std::uint64_t target = recorded_;
  changed_.wait(lock, [&] { return reached_ >= target; });
}

CUresult Event::time(Clock::time_point& when) const {
  std::lock_guard lock(mutex_);
  if (!timing_ || recorded_ == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (reached_ < recorded_) return CUDA_ERROR_NOT_READY;
  when = when_;
  return CUDA_SUCCESS;
}

}  // namespace fake_cuda
