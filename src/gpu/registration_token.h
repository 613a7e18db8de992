// The node-local registration token (HiPC'22 cache-allocation paper, section
// IV-A): only one process of a node pins its host buffer at a time. Pinning
// requests that run together slow each other down several times (the paper
// measures serial pinning 6.4x faster on average, Fig. 5c), and a
// registration stalls its device's copies while it runs; taking turns lets
// each finish at full speed while the others keep flushing to unpinned pages.
//
// The token is handed in turn (the paper's round robin): a waiter takes a
// ticket and holds the token when every older ticket is served, so a
// process that registers again and again queues behind the others instead of
// winning each race for the lock, and nobody waits more than one turn of
// each other process. The files, all in `directory`/resurgo-<euid>/ (default
// directory /dev/shm, a tmpfs every process of the node sees):
// - `name`.lock, the token itself: an exclusive flock(2) held while
//   registering, so two holders exclude each other even outside the queue;
// - `name`.queue, "next <n> serving <m>": the next ticket to hand out and
//   the oldest one that may still wait, read and replaced (through
//   `name`.queue.new and a rename) only under the short flock of
//   `name`.guard;
// - `name`.ticket-<n>, flocked by the waiter of ticket n until it has
//   registered or given up, then removed. A waiter or holder that dies
//   releases its flock: the next waiter finds the ticket unlocked, removes
//   it and skips it, so a dead process never blocks the others.
// The per-user directory is opened through Env::open_directory (made 0700
// when missing; refused, naming the path, when another user could change it
// or a directory above it: a sticky one such as /dev/shm is fine above it);
// lock files through Directory::lock(), which creates them 0600 without
// following a link and refuses one another user owns; the queue is created
// O_EXCL|O_NOFOLLOW 0600, read only when it is a regular file of the user's
// and at most 64 bytes long. So another user can neither hold the token nor
// plant a file. flock locks go with the open file description: two holders
// in one process exclude each other as two processes do. The token and
// guard files are never removed (removing one would let a newcomer lock a
// new file while an old holder still locks the unlinked one); ticket numbers
// are never reused, so removing a ticket file is safe.
//
// Thread safety: a token may be acquired from several threads at once; each
// Hold belongs to one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "resurgo/env.hpp"

namespace resurgo::gpu {

class RegistrationToken {
 public:
  static constexpr const char* kDefaultDirectory = "/dev/shm";
  static constexpr std::chrono::milliseconds kForever = std::chrono::milliseconds::max();

  // The token's files in `directory`/resurgo-<euid>/ (an empty directory:
  // the default). Validates `name` (not empty, at most 200 bytes,
  // no '/', no "..", no control characters): InvalidArgumentError otherwise.
  // acquire() waits at most `patience`. Opens nothing yet.
  RegistrationToken(std::string directory, const std::string& name, std::chrono::milliseconds patience = kForever);

  const std::string& path() const { return path_; }

  // The token, held until release() or destruction. Movable.
  class Hold {
   public:
    Hold() = default;
    explicit operator bool() const { return lock_ != nullptr; }
    // The token first, then the ticket: the next waiter finds its turn
    // and the token free together.
    void release() noexcept {
      lock_.reset();
      ticket_.reset();
    }

   private:
    friend class RegistrationToken;
    Hold(std::unique_ptr<FileLock> lock, std::unique_ptr<FileLock> ticket)
        : ticket_(std::move(ticket)), lock_(std::move(lock)) {}
    std::unique_ptr<FileLock> ticket_;  // declared first: destroyed after lock_
    std::unique_ptr<FileLock> lock_;
  };

  // Each throws StorageError naming the file when the directory or one of
  // the token's files cannot be opened, read or locked for another reason
  // than someone else holding it (a file planted by another user, a link,
  // a damaged queue).
  //
  // The token if nobody holds it or waits for it, else an empty Hold.
  Hold try_acquire() const;
  // Takes a ticket and waits until the token is ours (polling, from 1 ms up
  // to 16 ms apart), or `timeout` passed, or `give_up` returns true: an
  // empty Hold then, and the ticket is given back.
  Hold acquire_for(std::chrono::milliseconds timeout, const std::function<bool()>& give_up = {}) const;
  // Waits until the token is ours or `give_up` returns true (empty Hold).
  // Past the token's patience it throws StateError naming the lock file:
  // another process has held it all that time.
  Hold acquire(const std::function<bool()>& give_up = {}) const;

 private:
  struct Queue {
    std::uint64_t next = 0;     // the ticket the next waiter takes
    std::uint64_t serving = 0;  // every older ticket is served or dead
  };

  // Polls until the deadline (none: for ever) or give_up().
  Hold poll(const std::chrono::steady_clock::time_point* deadline, const std::function<bool()>& give_up) const;
  std::unique_ptr<Directory> open_directory() const;
  // The token's lock, or none while someone else holds it.
  std::unique_ptr<FileLock> try_lock(Directory& directory) const;
  // The guard over the queue, or none when another process kept it for
  // longer than a queue update takes (stopped, say): try again later.
  std::unique_ptr<FileLock> lock_guard(Directory& directory) const;
  Queue read_queue(Directory& directory) const;
  void write_queue(Directory& directory, const Queue& queue) const;
  // A new ticket, locked and numbered `*number`; none when the guard is busy.
  std::unique_ptr<FileLock> take_ticket(const std::shared_ptr<Directory>& directory, std::uint64_t* number) const;
  // Whether every ticket older than `number` is served, or its waiter dead
  // (its file then removed).
  bool is_turn(Directory& directory, std::uint64_t number) const;
  bool ticket_waits(Directory& directory, std::uint64_t number) const;
  std::string ticket_file(std::uint64_t number) const;
  std::string path_of(const std::string& file) const { return directory_ + "/" + file; }

  std::string directory_;  // the per-user one
  std::string name_;
  std::string file_;       // `name`.lock
  std::string path_;
  std::chrono::milliseconds patience_;
};

}  // namespace resurgo::gpu
