// The POSIX files under both the path-based Env (posix_env.cpp) and the
// directories it opens (posix_directory.cpp): a file being written, a file
// being read, a file written at offsets, and an advisory lock. Short
// writes and EINTR are retried; every other failure becomes a StorageError
// naming the operation and the path.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "io/system_calls.h"
#include "resurgo/env.hpp"

namespace resurgo {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error_number);

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(int fd, std::string path, const SystemCalls& calls)
      : fd_(fd), path_(std::move(path)), calls_(calls) {}
  ~PosixWritableFile() override;
  void append(const void* data, std::size_t bytes) override;
  void sync() override;
  void close() override;
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
  ~PosixReadableFile() override;
  void read_at(std::uint64_t offset, void* data, std::size_t bytes) const override;
  std::uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
  std::uint64_t size_;
  SystemCalls calls_;
};

class PosixPositionalFile final : public PositionalFile {
 public:
  PosixPositionalFile(int fd, std::string path, const SystemCalls& calls)
      : fd_(fd), path_(std::move(path)), calls_(calls) {}
  ~PosixPositionalFile() override;
  PosixPositionalFile(const PosixPositionalFile&) = delete;
  PosixPositionalFile& operator=(const PosixPositionalFile&) = delete;
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes) override;
  void sync() override;
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
  SystemCalls calls_;
};

// The flags every file is opened with: never through a link (a planted
// link fails with ELOOP) and never blocking on a FIFO at open.
inline constexpr int kReadFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
inline constexpr int kCreateFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
inline constexpr int kPositionalFlags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
inline constexpr int kLockFlags = O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

// What open() returned for `path` with kReadFlags: the descriptor, or the
// StorageError (NotFoundError for a missing file) that says why not.
int opened_or_fail(int fd, const std::string& path);
// The status of the descriptor `fd` of `path`, which must be a regular
// file; otherwise `fd` is closed and a StorageError says what it is.
struct stat regular_file_status(int fd, const std::string& path);
// `fd` (opened with O_NONBLOCK) made blocking again, as a ReadableFile.
std::unique_ptr<ReadableFile> readable_file(int fd, const std::string& path, const struct stat& status,
                                            const SystemCalls& calls);
// `fd` (created with kCreateFlags) given exactly `mode`, whatever the umask.
std::unique_ptr<WritableFile> writable_file(int fd, const std::string& path, unsigned mode,
                                            const SystemCalls& calls);

// What open() returned for `path` with kPositionalFlags, as a WritableFile
// emptied and given exactly `mode`: StorageError (NotFoundError when
// missing) for anything but a regular file of this user, which is left as
// it is.
std::unique_ptr<WritableFile> emptied_file(int fd, const std::string& path, unsigned mode, const SystemCalls& calls);

// What open() returned for `path` with kPositionalFlags, as a
// PositionalFile: StorageError (NotFoundError when missing) for anything
// but a regular file of this user, which only rank 0 of the job can have
// created (the shared file of a version).
std::unique_ptr<PositionalFile> positional_file(int fd, const std::string& path, const SystemCalls& calls);

// Opens the lock file `path` through `open_file` (which returns a
// descriptor opened with kLockFlags, or -1 with errno set), refuses one that
// is no regular file of this user, and takes an exclusive flock on it; a
// StateError when another process or Store object holds it.
std::unique_ptr<FileLock> lock_file(const std::string& path, const std::function<int()>& open_file);

}  // namespace resurgo
