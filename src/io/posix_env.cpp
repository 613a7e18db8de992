// POSIX implementation of Env. The path methods serve tools and tests that
// name files themselves; a store works through the directories that
// open_directory() opens and checks (posix_directory.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "io/posix_directory.h"
#include "io/posix_files.h"
#include "io/system_calls.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

class PosixEnv final : public Env {
 public:
  explicit PosixEnv(const SystemCalls& calls) : calls_(calls) {}
  std::unique_ptr<WritableFile> create(const std::string& path, unsigned mode) override {
    return writable_file(::open(path.c_str(), kCreateFlags, mode), path, mode, calls_);
  }
  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    const int fd = opened_or_fail(::open(path.c_str(), kReadFlags), path);
    return readable_file(fd, path, regular_file_status(fd, path), calls_);
  }
  std::unique_ptr<PositionalFile> open_positional(const std::string& path) override {
    return positional_file(::open(path.c_str(), kPositionalFlags), path, calls_);
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
    sync_directory(fd, dir, calls_);
    calls_.close(fd);
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
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return {};
      fail("list directory", dir, errno);
    }
    return list_directory(fd, dir);
  }
  bool exists(const std::string& path) override {
    struct stat info {};
    return ::lstat(path.c_str(), &info) == 0;
  }
  std::unique_ptr<FileLock> lock(const std::string& path) override {
    return lock_file(path, [&] { return ::open(path.c_str(), kLockFlags, 0600); });
  }
  std::unique_ptr<Directory> open_directory(const std::string& path, const DirectoryRules& rules) override {
    return open_posix_directory(path, rules, calls_);
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
