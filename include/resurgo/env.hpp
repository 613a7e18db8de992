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

// A file written at offsets: the shared file of a version (persistent.layout
// = shared, docs/mpi.md), which rank 0 creates and every rank then fills at
// the offset the ranks agreed on. Every other file is only appended to.
class PositionalFile {
 public:
  virtual ~PositionalFile() = default;
  // Writes all of `bytes` at `offset` (short writes and EINTR retried).
  virtual void write_at(std::uint64_t offset, const void* data, std::size_t bytes) = 0;
  virtual void sync() = 0;  // fdatasync: durable on return
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

// Who may own what a store's directory holds (docs/reliability.md,
// "Security"). By default only the user: the directory, each directory
// above it that is not root's (or sticky, as /tmp), and every file read.
struct DirectoryRules {
  // Create the directory, and those above it, when missing (mode 0700).
  // Their entries in their parents become durable at the directory's first
  // sync(), not at open: nothing in it needs them before.
  bool create = true;
  // A directory shared with the members of its group (a project directory
  // of mode 2770): directories writable by their group are accepted, and
  // files owned by another member, when the file's group is the directory's.
  bool shared_group = false;
  // A sticky directory that others may write (as /tmp) is accepted as the
  // directory itself: nobody else can rename or remove what is yours in it,
  // and every file is created exclusively. For a single file of your own,
  // such as a trace; never for a store, whose names others could take first.
  bool accept_sticky = false;
};

// A directory opened once and checked: every file operation is relative to
// it (openat, renameat, unlinkat), so a path component swapped after the
// check cannot redirect the store elsewhere. Names are single path
// components. Methods throw StorageError naming the path on failure.
class Directory {
 public:
  virtual ~Directory() = default;
  virtual const std::string& path() const = 0;
  // Creates `name`, which must not exist (O_EXCL|O_NOFOLLOW: a planted file
  // or link fails the call), with permission bits `mode`.
  virtual std::unique_ptr<WritableFile> create(const std::string& name, unsigned mode) = 0;
  // Opens the regular file `name` without following a link and without
  // blocking on a FIFO; NotFoundError when missing, StorageError for a file
  // that is no regular file or is owned by someone the rules do not accept.
  virtual std::unique_ptr<ReadableFile> open(const std::string& name) = 0;
  // Opens the existing regular file `name` of this user for writes at
  // offsets, as open() does (no link followed, no FIFO waited on);
  // NotFoundError when missing, StorageError for any other file.
  virtual std::unique_ptr<PositionalFile> open_positional(const std::string& name) = 0;
  virtual void rename(const std::string& from, const std::string& to) = 0;
  // Renames the regular file `from` of this user to `to`, which must not
  // exist, and opens it, with permission bits `mode`, for appends that
  // write over it from its start; at the first sync and at close the file
  // ends where the appends did. A file made without allocating an inode or
  // pages, where creating one after removing another makes ext4 search its
  // inode bitmap past the inodes just freed. This default removes `from`
  // and creates `to` (the Envs that wrap another); the POSIX directory
  // renames and writes over.
  virtual std::unique_ptr<WritableFile> reuse(const std::string& from, const std::string& to, unsigned mode) {
    remove(from);
    return create(to, mode);
  }
  // Publishes `from` as `to` only when `to` does not exist; false when it
  // does (`from` is left in place). For files that are written once.
  virtual bool rename_new(const std::string& from, const std::string& to) = 0;
  virtual void remove(const std::string& name) = 0;  // missing file is fine
  // fsync of the directory (and, the first time, of the parents of the
  // directories open_directory made for it: DirectoryRules::create).
  virtual void sync() = 0;
  virtual std::vector<std::string> list() = 0;
  virtual bool exists(const std::string& name) = 0;
  // Exclusive advisory lock on `name` (created if missing, never through a
  // link). Throws StateError at once when another process or store holds it.
  virtual std::unique_ptr<FileLock> lock(const std::string& name) = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // Creates `path`, which must not exist, with permission bits `mode`
  // (O_EXCL|O_NOFOLLOW).
  virtual std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) = 0;
  // Opens a regular file (no FIFO, device or directory) for reading.
  virtual std::unique_ptr<ReadableFile> open(const std::string& path) = 0;
  // Directory::open_positional by path. This default refuses, naming the
  // path: an Env that keeps its files elsewhere (a test's in-memory one) has
  // no offsets to write at. The POSIX Env and FaultEnv implement it.
  virtual std::unique_ptr<PositionalFile> open_positional(const std::string& path);
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
  // Opens the directory `path` under `rules`: StorageError naming the path
  // and what to do when it, or a directory above it, could be changed by
  // another user. This default checks nothing and works through the path
  // methods above (for Envs that wrap another to inject faults); the POSIX
  // Env opens, checks and holds the directory itself.
  virtual std::unique_ptr<Directory> open_directory(const std::string& path, const DirectoryRules& rules);

  // The process-wide POSIX implementation.
  static std::shared_ptr<Env> posix();
};

}  // namespace resurgo
