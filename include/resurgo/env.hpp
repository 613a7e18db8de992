// Env: every file-system access of Resurgo goes through this interface so
// that tests can inject faults (ENOSPC, EIO, short writes, crash points),
// as in LevelDB. Methods throw StorageError naming the path on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace resurgo {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual void append(const void* data, std::size_t bytes) = 0;
  virtual void sync() = 0;   // fdatasync/fsync: durable on return
  virtual void close() = 0;  // idempotent
  virtual const std::string& path() const = 0;
};

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads exactly `bytes` at `offset`; a short file is a StorageError.
  virtual void read_at(std::uint64_t offset, void* data, std::size_t bytes) const = 0;
  virtual std::uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

// Held for as long as the object lives.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;
  // Creates (truncating) `path` with permission bits `mode`.
  virtual std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) = 0;
  virtual std::unique_ptr<ReadableFile> open(const std::string& path) = 0;
  virtual void rename(const std::string& from, const std::string& to) = 0;
  virtual void remove(const std::string& path) = 0;  // missing file is fine
  virtual void sync_dir(const std::string& dir) = 0;
  // mkdir -p with mode 0700 for the directories it creates.
  virtual void create_dirs(const std::string& dir) = 0;
  virtual std::vector<std::string> list_dir(const std::string& dir) = 0;  // names
  virtual bool exists(const std::string& path) = 0;
  // Exclusive advisory lock on `path` (created if missing). Throws StateError
  // at once when another process or store holds it.
  virtual std::unique_ptr<FileLock> lock(const std::string& path) = 0;

  // The process-wide POSIX implementation.
  static std::shared_ptr<Env> posix();
};

}  // namespace resurgo
