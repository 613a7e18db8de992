// The node-local registration token (HiPC'22 cache-allocation paper, section
// IV-A): only one process of a node pins its host buffer at a time. Pinning
// requests that run together slow each other down several times (the paper
// measures serial pinning 6.4x faster on average, Fig. 5c), and a
// registration stalls its device's copies while it runs; taking turns lets
// each finish at full speed while the others keep flushing to unpinned pages.
//
// The token is an exclusive flock(2) on a lock file:
// `directory`/resurgo-<euid>/`name`.lock (default directory /dev/shm, a tmpfs
// every process of the node sees). The per-user directory is opened through
// Env::open_directory (made 0700 when missing; refused, naming the path,
// when another user could change it or a directory above it: a sticky one
// such as /dev/shm is fine above it) and the lock file through its
// Directory::lock(), which creates it 0600 without following a link and
// refuses one another user owns. So another user can neither hold the token
// nor plant the file. The lock goes with the open file description: two
// holders in one process exclude each other as two processes do, and a
// holder that dies releases it. The file is never removed (removing it would
// let a newcomer lock a new file while an old holder still locks the
// unlinked one).
//
// Thread safety: a token may be acquired from several threads at once; each
// Hold belongs to one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "resurgo/env.hpp"

namespace resurgo::gpu {

class RegistrationToken {
 public:
  static constexpr const char* kDefaultDirectory = "/dev/shm";
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();

  // The lock file `directory`/resurgo-<euid>/`name`.lock (an empty
  // directory: the default). Validates `name` (not empty, at most 200 bytes,
  // no '/', no "..", no control characters): InvalidArgumentError otherwise.
  // acquire() waits at most `patience`. Opens nothing yet.
  RegistrationToken(std::string directory, const std::string& name, std::chrono::milliseconds patience = kForever);

  const std::string& path() const { return path_; }

  // The token, held until release() or destruction. Movable.
  class Hold {
   public:
    Hold() = default;
    explicit operator bool() const { return lock_ != nullptr; }
    void release() noexcept { lock_.reset(); }

   private:
    friend class RegistrationToken;
    explicit Hold(std::unique_ptr<FileLock> lock) : lock_(std::move(lock)) {}
    std::unique_ptr<FileLock> lock_;
  };

  // Each throws StorageError naming the lock file when its directory or the
  // file cannot be opened or locked for another reason than someone else
  // holding it.
  //
  // The token if nobody holds it, else an empty Hold.
  Hold try_acquire() const;
  // Waits until the token is ours (polling, from 1 ms up to 16 ms apart), or
  // `timeout` passed, or `give_up` returns true: an empty Hold then.
  Hold acquire_for(std::chrono::milliseconds timeout, const std::function<bool()>& give_up = {}) const;
  // Waits until the token is ours or `give_up` returns true (empty Hold).
  // Past the token's patience it throws StateError naming the lock file:
  // another process has held it all that time.
  Hold acquire(const std::function<bool()>& give_up = {}) const;

 private:
  // Polls until the deadline (none: for ever) or give_up().
  Hold poll(const std::chrono::steady_clock::time_point* deadline, const std::function<bool()>& give_up) const;
  std::unique_ptr<Directory> open_directory() const;
  // The lock, or none while someone else holds it.
  std::unique_ptr<FileLock> try_lock(Directory& directory) const;

  std::string directory_;  // the per-user one
  std::string file_;       // `name`.lock
  std::string path_;
  std::chrono::milliseconds patience_;
};

}  // namespace resurgo::gpu
