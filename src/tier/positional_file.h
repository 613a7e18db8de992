// A file of a directory level written at offsets by several processes: the
// shared file of a version (format/shared_file.h), which rank 0 creates
// through the Env seam (O_EXCL|O_NOFOLLOW, the level's mode) and every rank
// then opens to write its part where the ranks agreed. The Env's files only
// append, so this is the one writer that seeks; it opens the file without
// following a link and refuses one that is not a regular file of this user.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace resurgo {

class PositionalFile {
 public:
  virtual ~PositionalFile() = default;
  // Writes all of `bytes` at `offset` (short writes and EINTR retried).
  virtual void write_at(std::uint64_t offset, const void* data, std::size_t bytes) = 0;
  virtual void sync() = 0;  // fdatasync: durable on return
  virtual const std::string& path() const = 0;
};

// Opens the existing file `path` for positional writes; StorageError naming
// the path and the cause otherwise.
std::unique_ptr<PositionalFile> open_positional(const std::string& path);

}  // namespace resurgo
