// POSIX implementation of Env. Short writes and EINTR are retried; every
// other failure becomes a StorageError naming the operation and the path.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>

#include "io/system_calls.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error_number) {
  std::string hint;
  if (error_number == ENOSPC || error_number == EDQUOT) hint = "; free space or point the tier's path elsewhere";
  if (error_number == EACCES || error_number == EPERM || error_number == EROFS) hint = "; check the directory's permissions";
  throw StorageError("cannot " + what + " '" + path + "': " + std::strerror(error_number) + hint);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path, const SystemCalls& calls)
      : fd_(fd), path_(std::move(path)), calls_(calls) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) calls_.close(fd_);
  }
  void append(const void* data, std::size_t bytes) override {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t written = calls_.write(fd_, p, std::min<std::size_t>(bytes, 1u << 30));
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("write", path_, errno);
      }
      p += written;
      bytes -= static_cast<std::size_t>(written);
    }
  }
  void sync() override {
    while (calls_.fdatasync(fd_) != 0) {
      if (errno != EINTR) fail("fsync", path_, errno);
    }
  }
  void close() override {
    if (fd_ < 0) return;
    const int fd = fd_;
    fd_ = -1;
    // Linux closes the descriptor even when close() reports EINTR.
    if (calls_.close(fd) != 0 && errno != EINTR) fail("close", path_, errno);
  }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
  SystemCalls calls_;
};

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path, std::uint64_t size, const SystemCalls& calls)
      : fd_(fd), path_(std::move(path)), size_(size), calls_(calls) {}
  ~PosixReadableFile() override { calls_.close(fd_); }
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override {
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
  std::uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
  std::uint64_t size_;
  SystemCalls calls_;
};

// The lock descriptors this process holds. A forked child (fork capture's
// writer, or any fork of the application) inherits them, and a flock lock
// lasts while any descriptor of its open file description does: a writer of
// one store would keep every other store of the process locked until it
// exits. The atfork child handler points each of them at /dev/null in the
// child, which lets go of the child's reference (the parent keeps the lock)
// and keeps the number valid, so nothing reuses it and a later close() in
// the child is harmless. The registry mutex is held across fork() and
// across lock-and-register and unregister-and-close, so a child never sees
// a lock descriptor that is not registered.
struct LockRegistry {
  static std::mutex& mutex() {
    static std::mutex registry_mutex;
    return registry_mutex;
  }
  static std::set<int>& fds() {
    static std::set<int> held;
    return held;
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
  explicit PosixFileLock(int fd) : fd_(fd) {}  // registered by PosixEnv::lock
  ~PosixFileLock() override {
    std::lock_guard guard(LockRegistry::mutex());
    LockRegistry::fds().erase(fd_);
    ::close(fd_);  // closing releases the flock
  }

 private:
  int fd_;
};

class PosixEnv final : public Env {
 public:
  explicit PosixEnv(const SystemCalls& calls) : calls_(calls) {}
  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) fail("create", path, errno);
    // The umask must not widen or narrow the configured mode.
    if (::fchmod(fd, mode) != 0) {
      const int error_number = errno;
      ::close(fd);
      fail("set the mode of", path, error_number);
    }
    return std::make_unique<PosixWritableFile>(fd, path, calls_);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) throw NotFoundError("no such file '" + path + "'");
      fail("open", path, errno);
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw StorageError("cannot read '" + path + "': not a regular file");
    }
    return std::make_unique<PosixReadableFile>(fd, path, static_cast<std::uint64_t>(info.st_size), calls_);
  }
  void rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) fail("rename to '" + to + "'", from, errno);
  }
  void remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("remove", path, errno);
  }
  void sync_dir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open directory", dir, errno);
    int status = 0;
    while ((status = calls_.fsync(fd)) != 0 && errno == EINTR) {
    }
    const int error_number = errno;
    calls_.close(fd);
    if (status != 0) fail("fsync directory", dir, error_number);
  }
  void create_dirs(const std::string& dir) override {
    for (std::size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
      const std::string prefix = dir.substr(0, slash);
      if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        fail("create directory", prefix, errno);
      }
      if (slash == std::string::npos) break;
    }
    struct stat info {};
    if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      throw StorageError("cannot use '" + dir + "' as a directory: it exists and is not one");
    }
  }
  std::vector<std::string> list_dir(const std::string& dir) override {
    DIR* handle = ::opendir(dir.c_str());
    if (handle == nullptr) {
      if (errno == ENOENT) return {};
      fail("list directory", dir, errno);
    }
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(handle)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(handle);
    return names;
  }
  bool exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  std::unique_ptr<FileLock> lock(const std::string& path) override {
    LockRegistry::install();
    std::lock_guard guard(LockRegistry::mutex());
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) fail("create lock file", path, errno);
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

 private:
  SystemCalls calls_;
};

}  // namespace

std::shared_ptr<Env> Env::posix() {
  static const std::shared_ptr<Env> env = std::make_shared<PosixEnv>(SystemCalls{});
  return env;
}

std::shared_ptr<Env> posix_env_with(const SystemCalls& calls) { return std::make_shared<PosixEnv>(calls); }

}  // namespace resurgo
