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
  // `stale_bytes`: the size of an existing file written over from its start
  // (Directory::reuse); what lies beyond the bytes appended is cut before
  // the first sync and at close.
  PosixWritableFile(int fd, std::string path, const SystemCalls& calls, std::uint64_t stale_bytes = 0)
      : fd_(fd), path_(std::move(path)), calls_(calls), stale_bytes_(stale_bytes) {}
  ~PosixWritableFile() override;
  void append(const void* data, std::size_t bytes) override;
  void sync() override;
  void close() override;
  const std::string& path() const override { return path_; }

 private:
  void cut_stale_tail();

  int fd_;
  std::string path_;
  SystemCalls calls_;
  std::uint64_t appended_ = 0;
  std::uint64_t stale_bytes_;
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
// `fd` (created with kCreateFlags) given exactly `mode`, whatever the umask;
// `stale_bytes` as PosixWritableFile's.
std::unique_ptr<WritableFile> writable_file(int fd, const std::string& path, unsigned mode, const SystemCalls& calls,
                                            std::uint64_t stale_bytes = 0);

// What open() returned for `path` with kPositionalFlags, as a WritableFile
// given exactly `mode` that writes over the file from its start and cuts
// what the new bytes do not cover (not emptied first: ext4 writes back a
// file's data when it is closed after a truncation to zero, and overwritten
// pages need no allocation): StorageError (NotFoundError when missing) for
// anything but a regular file of this user, which is left as it is.
std::unique_ptr<WritableFile> overwritten_file(int fd, const std::string& path, unsigned mode,
                                               const SystemCalls& calls);

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
