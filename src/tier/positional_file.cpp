#include "tier/positional_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "io/posix_files.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

class PosixPositionalFile final : public PositionalFile {
 public:
  PosixPositionalFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixPositionalFile() override { ::close(fd_); }
  PosixPositionalFile(const PosixPositionalFile&) = delete;
  PosixPositionalFile& operator=(const PosixPositionalFile&) = delete;

  void write_at(std::uint64_t offset, const void* data, std::size_t bytes) override {
    const auto* next = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t written = ::pwrite(fd_, next, bytes, static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("pwrite", path_, errno);
      }
      next += written;
      offset += static_cast<std::uint64_t>(written);
      bytes -= static_cast<std::size_t>(written);
    }
  }
  void sync() override {
    while (::fdatasync(fd_) != 0) {
      if (errno != EINTR) fail("fdatasync", path_, errno);
    }
  }
  const std::string& path() const override { return path_; }

 private:
  int fd_;
  std::string path_;
};

}  // namespace

std::unique_ptr<PositionalFile> open_positional(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail("open for writing", path, errno);
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_uid != ::geteuid()) {
    ::close(fd);
    throw StorageError("'" + path + "' is not a regular file of this user: the shared file of a version is written "
                       "only into a file rank 0 created; remove what is in its place");
  }
  return std::make_unique<PosixPositionalFile>(fd, path);
}

}  // namespace resurgo
