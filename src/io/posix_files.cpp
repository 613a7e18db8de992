#include "io/posix_files.h"

#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "resurgo/errors.hpp"

namespace resurgo {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error_number) {
  std::string hint;
  if (error_number == ENOSPC || error_number == EDQUOT) hint = "; free space or point the level's path elsewhere";
  if (error_number == EACCES || error_number == EPERM || error_number == EROFS) {
    hint = "; check the directory's permissions";
  }
  if (error_number == ELOOP) hint = " (it is a symbolic link, which a store never follows); remove it";
  if (error_number == EEXIST) hint = " (a file of that name exists, which a store never overwrites); remove it";
  throw StorageError("cannot " + what + " '" + path + "': " + std::strerror(error_number) + hint);
}

PosixWritableFile::~PosixWritableFile() {
  if (fd_ >= 0) calls_.close(fd_);
}

void PosixWritableFile::append(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = calls_.write(fd_, p, std::min<std::size_t>(bytes, 1u << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("write", path_, errno);
    }
    p += written;
    bytes -= static_cast<std::size_t>(written);
    appended_ += static_cast<std::uint64_t>(written);
  }
}

void PosixWritableFile::cut_stale_tail() {
  if (stale_bytes_ <= appended_) return;
  while (::ftruncate(fd_, static_cast<off_t>(appended_)) != 0) {
    if (errno != EINTR) fail("cut the old bytes of", path_, errno);
  }
  stale_bytes_ = appended_;
}

void PosixWritableFile::sync() {
  cut_stale_tail();
  while (calls_.fdatasync(fd_) != 0) {
    if (errno != EINTR) fail("fsync", path_, errno);
  }
}

void PosixWritableFile::close() {
  if (fd_ < 0) return;
  cut_stale_tail();
  const int fd = fd_;
  fd_ = -1;
  // Linux closes the descriptor even when close() reports EINTR.
  if (calls_.close(fd) != 0 && errno != EINTR) fail("close", path_, errno);
}

PosixReadableFile::~PosixReadableFile() { calls_.close(fd_); }

void PosixReadableFile::read_at(std::uint64_t offset, void* data, std::size_t bytes) const {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = calls_.pread(fd_, p, std::min<std::size_t>(bytes, 1u << 30), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail("read", path_, errno);
    }
    if (got == 0) {
      throw StorageError("cannot read '" + path_ + "': unexpected end of file at byte " + std::to_string(offset));
    }
    p += got;
    offset += static_cast<std::uint64_t>(got);
    bytes -= static_cast<std::size_t>(got);
  }
}

PosixPositionalFile::~PosixPositionalFile() { calls_.close(fd_); }

void PosixPositionalFile::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written =
        calls_.pwrite(fd_, p, std::min<std::size_t>(bytes, 1u << 30), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      fail("write at byte " + std::to_string(offset) + " of", path_, errno);
    }
    p += written;
    offset += static_cast<std::uint64_t>(written);
    bytes -= static_cast<std::size_t>(written);
  }
}

void PosixPositionalFile::sync() {
  while (calls_.fdatasync(fd_) != 0) {
    if (errno != EINTR) fail("fsync", path_, errno);
  }
}

int opened_or_fail(int fd, const std::string& path) {
  if (fd >= 0) return fd;
  if (errno == ENOENT) throw NotFoundError("no such file '" + path + "'");
  fail("open", path, errno);
}

namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

struct stat regular_file_status(int fd, const std::string& path) {
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int error_number = errno;
    ::close(fd);
    fail("inspect", path, error_number);
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd);
    throw StorageError("cannot read '" + path + "': it is " + file_type_name(status.st_mode) +
                       ", not a regular file; remove it or point the store elsewhere");
  }
  return status;
}

namespace {

// O_NONBLOCK kept open() from waiting on a FIFO; the file's own calls block.
void make_blocking(int fd, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int error_number = errno;
    ::close(fd);
    fail("open", path, error_number);
  }
}

}  // namespace

std::unique_ptr<ReadableFile> readable_file(int fd, const std::string& path, const struct stat& status,
                                            const SystemCalls& calls) {
  make_blocking(fd, path);
  return std::make_unique<PosixReadableFile>(fd, path, static_cast<std::uint64_t>(status.st_size), calls);
}

namespace {

// The status of `fd`, opened with kPositionalFlags, then made blocking;
// `fd` closed, and `why` thrown naming `path`, unless it is a regular file
// of this user.
struct stat own_regular_file(int fd, const std::string& path, const std::string& why) {
  opened_or_fail(fd, path);
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_uid != ::geteuid()) {
    ::close(fd);
    throw StorageError("cannot write '" + path + "': it is not a regular file of this user, " + why);
  }
  make_blocking(fd, path);
  return status;
}

}  // namespace

std::unique_ptr<PositionalFile> positional_file(int fd, const std::string& path, const SystemCalls& calls) {
  const std::string why = "and the shared file of a version is written only into the file rank 0 created; remove "
                          "what is in its place";
  own_regular_file(fd, path, why);
  return std::make_unique<PosixPositionalFile>(fd, path, calls);
}

std::unique_ptr<WritableFile> overwritten_file(int fd, const std::string& path, unsigned mode,
                                               const SystemCalls& calls) {
  const std::string why = "as the file of a removed version this store renamed there would be; remove what is in "
                          "its place";
  const struct stat status = own_regular_file(fd, path, why);
  return writable_file(fd, path, mode, calls, static_cast<std::uint64_t>(status.st_size));
}

std::unique_ptr<WritableFile> writable_file(int fd, const std::string& path, unsigned mode, const SystemCalls& calls,
                                            std::uint64_t stale_bytes) {
  if (fd < 0) fail("create", path, errno);
  // The umask must not widen or narrow the configured mode.
  if (::fchmod(fd, mode) != 0) {
    const int error_number = errno;
    ::close(fd);
    fail("set the mode of", path, error_number);
  }
  return std::make_unique<PosixWritableFile>(fd, path, calls, stale_bytes);
}

namespace {

// The lock descriptors this process holds. A forked child (fork capture's
// writer, or any fork of the application) inherits them, and a flock lock
// lasts while any descriptor of its open file description does: a writer of
// one store would keep every other store of the process locked until it
// exits. The atfork child handler points each of them at /dev/null in the
// child, which lets go of the child's reference (the parent keeps the lock;
// the child must never unlock, which would release the parent's lock too)
// and keeps the number valid, so nothing reuses it and a later close() in
// the child is harmless. The parent's release does not wait for a child
// that has not run it yet (~PosixFileLock). The registry mutex is held
// across fork() and across lock-and-register and unregister-and-close, so
// a child never sees a lock descriptor that is not registered.
struct LockRegistry {
  static std::mutex& mutex() {
    static std::mutex registry_mutex;
    return registry_mutex;
  }
  // Never destroyed: a store may be closed, and its lock released, by an
  // atexit handler that runs after the function-local statics are gone
  // (appic closes its stores at exit).
  static std::set<int>& fds() {
    static auto* held = new std::set<int>;
    return *held;
  }
  static void release_in_child() {
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (const int fd : fds()) {
      if (null_fd >= 0) ::dup3(null_fd, fd, O_CLOEXEC);
    }
    if (null_fd >= 0) ::close(null_fd);
    mutex().unlock();
  }
  static void install() {
    static std::once_flag installed;
    std::call_once(installed, [] {
      ::pthread_atfork([] { mutex().lock(); }, [] { mutex().unlock(); }, &LockRegistry::release_in_child);
    });
  }
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}  // registered by lock_file
  ~PosixFileLock() override {
    std::lock_guard guard(LockRegistry::mutex());
    LockRegistry::fds().erase(fd_);
    // Unlocked before the close: a child forked just before (another
    // store's fork capture writer) holds a copy of the descriptor until its
    // atfork handler runs, which under load may be long after this, and
    // while that copy lives a close alone would leave the file locked: the
    // store could not be opened again at once. LOCK_UN releases the lock of
    // the open file description whatever other descriptors refer to it.
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<FileLock> lock_file(const std::string& path, const std::function<int()>& open_file) {
  LockRegistry::install();
  std::lock_guard guard(LockRegistry::mutex());
  const int fd = open_file();
  if (fd < 0) fail("create lock file", path, errno);
  const struct stat status = regular_file_status(fd, path);
  if (status.st_uid != ::geteuid()) {
    ::close(fd);
    throw StorageError("lock file '" + path + "' belongs to user " + std::to_string(status.st_uid) +
                       ", not to you: another user could hold the store's lock; remove it");
  }
  // flock locks belong to the open file description, so two stores in one
  // process exclude each other too (fcntl record locks would not).
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error_number = errno;
    ::close(fd);
    if (error_number == EWOULDBLOCK) {
      throw StateError("'" + path + "' is locked: the same store and rank is open in another process or "
                       "another Store object; close it first or use another store name");
    }
    fail("lock", path, error_number);
  }
  LockRegistry::fds().insert(fd);
  return std::make_unique<PosixFileLock>(fd);
}

}  // namespace resurgo
