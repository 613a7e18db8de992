// The node-local registration token (HiPC'22 cache-allocation paper, section
// IV-A): only one process of a node pins its host buffer at a time. Pinning
// requests that run together slow each other down several times (the paper
// measures serial pinning 6.4x faster on average, Fig. 5c), and a
// registration stalls its device's copies while it runs; taking turns lets
// each finish at full speed while the others keep flushing to unpinned pages.
//
// The token is an exclusive flock(2) on a lock file: `directory`/`name`.lock
// (default directory /dev/shm, a tmpfs every process of the node sees). The
// lock goes with the open file description, so two holders in one process
// exclude each other as two processes do, and a holder that dies releases
// it. The file is created with mode 0600, without following a symbolic link,
// and never removed (removing it would let a newcomer lock a new file while
// an old holder still locks the unlinked one).
//
// Thread safety: a token may be acquired from several threads at once; each
// Hold belongs to one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace resurgo::gpu {

class RegistrationToken {
 public:
  static constexpr const char* kDefaultDirectory = "/dev/shm";

  // The lock file `directory`/`name`.lock (an empty directory: the default).
  // Validates `name` (not empty, at most 200 bytes, no '/', no "..", no
  // control characters): InvalidArgumentError otherwise. Opens nothing yet.
  RegistrationToken(std::string directory, const std::string& name);

  const std::string& path() const { return path_; }

  // The token, held until release() or destruction. Movable.
  class Hold {
   public:
    Hold() = default;
    ~Hold() { release(); }
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

    explicit operator bool() const { return fd_ >= 0; }
    void release() noexcept;

   private:
    friend class RegistrationToken;
    explicit Hold(int fd) : fd_(fd) {}
    int fd_ = -1;
  };

  // Each throws StorageError naming the lock file when it cannot be opened
  // or locked for another reason than someone else holding it.
  //
  // The token if nobody holds it, else an empty Hold.
  Hold try_acquire() const;
  // Waits until the token is ours (polling, from 1 ms up to 16 ms apart), or
  // `timeout` passed, or `give_up` returns true: an empty Hold then.
  Hold acquire_for(std::chrono::milliseconds timeout, const std::function<bool()>& give_up = {}) const;
  // Waits until the token is ours or `give_up` returns true (empty Hold).
  Hold acquire(const std::function<bool()>& give_up = {}) const;

 private:
  // fd of the open lock file; throws StorageError.
  int open_lock_file() const;
  // Polls until the deadline (none: for ever) or give_up().
  Hold poll(const std::chrono::steady_clock::time_point* deadline, const std::function<bool()>& give_up) const;

  std::string path_;
};

}  // namespace resurgo::gpu
