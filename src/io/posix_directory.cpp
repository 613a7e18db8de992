#include "io/posix_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <deque>
#include <mutex>

#include "io/fork_safe_lock.h"
#include "io/posix_files.h"
#include "resurgo/errors.hpp"

namespace resurgo {

void sync_directory(int fd, const std::string& path, const SystemCalls& calls) {
  int status = 0;
  while ((status = calls.fsync(fd)) != 0 && errno == EINTR) {
  }
  if (status != 0) fail("fsync directory", path, errno);
}

std::vector<std::string> list_directory(int fd, const std::string& path) {
  DIR* handle = ::fdopendir(fd);
  if (handle == nullptr) {
    const int error_number = errno;
    ::close(fd);
    fail("list directory", path, error_number);
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(handle)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(handle);
  return names;
}

namespace {

constexpr int kMaxLinks = 40;  // as the kernel's own path walk (ELOOP)

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

bool in_my_groups(gid_t group) {
  if (group == ::getegid()) return true;
  const int count = ::getgroups(0, nullptr);
  if (count <= 0) return false;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  const int got = ::getgroups(count, groups.data());
  for (int i = 0; i < got; ++i) {
    if (groups[static_cast<std::size_t>(i)] == group) return true;
  }
  return false;
}

bool group_trusted(const struct stat& status, const DirectoryRules& rules) {
  return rules.shared_group && in_my_groups(status.st_gid);
}

// Why a directory above the store's could be changed by someone else ("" when
// it cannot): only you, root, and with shared_group your group may own or
// write it, unless the sticky bit keeps others from renaming what is yours.
std::string ancestor_doubt(const struct stat& status, const DirectoryRules& rules) {
  const bool owner_trusted = status.st_uid == ::geteuid() || status.st_uid == 0 || group_trusted(status, rules);
  if (!owner_trusted) return "belongs to user " + std::to_string(status.st_uid);
  const bool sticky = (status.st_mode & S_ISVTX) != 0;
  if ((status.st_mode & S_IWOTH) && !sticky) return "is writable by every user (mode " + octal_mode(status.st_mode) + ")";
  if ((status.st_mode & S_IWGRP) && !sticky && !group_trusted(status, rules)) {
    return "is writable by its group " + std::to_string(status.st_gid) + " (mode " + octal_mode(status.st_mode) + ")";
  }
  return "";
}

// Why the store's own directory could be changed by someone else ("" when
// it cannot).
std::string directory_doubt(const struct stat& status, const DirectoryRules& rules) {
  const bool sticky_of_trusted_owner =
      (status.st_mode & S_ISVTX) != 0 && (status.st_uid == ::geteuid() || status.st_uid == 0);
  if (rules.accept_sticky && sticky_of_trusted_owner) return "";
  if (status.st_uid != ::geteuid() && !group_trusted(status, rules)) {
    return "belongs to user " + std::to_string(status.st_uid) + ", not to you (" + std::to_string(::geteuid()) + ")";
  }
  if (status.st_mode & S_IWOTH) return "is writable by every user (mode " + octal_mode(status.st_mode) + ")";
  if ((status.st_mode & S_IWGRP) && !group_trusted(status, rules)) {
    return "is writable by its group (mode " + octal_mode(status.st_mode) + ")";
  }
  return "";
}

std::deque<std::string> components_of(const std::string& path) {
  std::deque<std::string> parts;
  std::size_t begin = 0;
  while (begin <= path.size()) {
    const std::size_t slash = std::min(path.find('/', begin), path.size());
    if (slash > begin) parts.push_back(path.substr(begin, slash - begin));
    begin = slash + 1;
  }
  return parts;
}

// The parents of directories made on the way, held open until their first
// sync makes the new entries durable. Thread-safe: a level's workers sync
// its directory concurrently; and fork-safe (io/fork_safe_lock.h): a forked
// writer syncs it in a child.
class UnsyncedParents {
 public:
  UnsyncedParents() = default;
  UnsyncedParents(UnsyncedParents&& other) noexcept : parents_(std::move(other.parents_)) {}
  ~UnsyncedParents() {
    for (const Parent& parent : parents_) ::close(parent.fd);
  }

  void add(int fd, std::string made) { parents_.push_back({fd, std::move(made)}); }
  // A parent whose sync fails stays, and the next sync tries it again.
  void sync(const SystemCalls& calls) {
    std::lock_guard guard(lock_);
    while (!parents_.empty()) {
      const Parent& parent = parents_.front();
      try {
        sync_directory(parent.fd, parent_of(parent.made), calls);
      } catch (const StorageError& error) {
        throw StorageError("cannot make the new directory '" + parent.made + "' durable: " + error.what());
      }
      ::close(parent.fd);
      parents_.erase(parents_.begin());
    }
  }

 private:
  struct Parent {
    int fd;
    std::string made;  // the directory made in it
  };
  static std::string parent_of(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }

  ForkSafeLock lock_;
  std::vector<Parent> parents_;
};

// The walk from "/" to the directory: a stack of O_PATH descriptors, each
// checked when it was opened.
class PathWalk {
 public:
  PathWalk(std::string target, const DirectoryRules& rules) : target_(std::move(target)), rules_(rules) {}
  ~PathWalk() {
    for (const int fd : stack_) ::close(fd);
  }

  // The parents of the directories the walk made, for the directory to sync.
  UnsyncedParents take_made() { return std::move(made_); }

  // The directory, opened for reading, after the whole walk.
  int open() {
    if (target_.empty() || target_[0] != '/') {
      throw InvalidArgumentError("directory '" + target_ + "' is not an absolute path");
    }
    push(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC), "");
    std::deque<std::string> left = components_of(target_);
    while (!left.empty()) {
      const std::string name = left.front();
      left.pop_front();
      step(name, left);
    }
    refuse_if(directory_doubt(status_of(stack_.back()), rules_), walked_.empty() ? "/" : walked_, true);
    const int fd = ::openat(stack_.back(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("open directory", target_, errno);
    return fd;
  }

 private:
  void step(const std::string& name, std::deque<std::string>& left) {
    if (name == ".") return;
    if (name == "..") {
      if (stack_.size() > 1) pop();
      return;
    }
    struct stat entry {};
    if (::fstatat(stack_.back(), name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) fail("inspect", walked_ + "/" + name, errno);
      make(name);
      left.push_front(name);  // open what now exists (or what a racing process made)
      return;
    }
    if (S_ISLNK(entry.st_mode)) return follow(name, entry, left);
    // The last directory is checked by the rules for the store's own.
    push(::openat(stack_.back(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), name, !left.empty());
  }

  // A link inside a directory nobody else can change cannot be changed
  // either: its target is walked as if written in its place. In a sticky
  // directory (/tmp) anybody may have made it: only yours or root's count.
  void follow(const std::string& name, const struct stat& link, std::deque<std::string>& left) {
    if (link.st_uid != ::geteuid() && link.st_uid != 0) {
      refuse_if("is a link made by user " + std::to_string(link.st_uid), walked_ + "/" + name, false);
    }
    if (++links_ > kMaxLinks) fail("resolve", target_, ELOOP);
    std::string target(PATH_MAX, '\0');
    const ssize_t bytes = ::readlinkat(stack_.back(), name.c_str(), target.data(), target.size());
    if (bytes < 0) fail("read the link", walked_ + "/" + name, errno);
    target.resize(static_cast<std::size_t>(bytes));
    if (!target.empty() && target[0] == '/') {
      while (stack_.size() > 1) pop();
    }
    std::deque<std::string> parts = components_of(target);
    left.insert(left.begin(), parts.begin(), parts.end());
  }

  void make(const std::string& name) {
    const std::string path = walked_ + "/" + name;
    if (!rules_.create) throw NotFoundError("no directory '" + path + "' (on the way to '" + target_ + "')");
    if (::mkdirat(stack_.back(), name.c_str(), 0700) != 0) {
      if (errno == EEXIST) return;
      fail("create directory", path, errno);
    }
    // The new entry lives in its parent: the directory's first sync()
    // syncs the parent, or a power loss could take the directory away with
    // every version committed in it.
    const int parent = ::openat(stack_.back(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) fail("open directory", walked_.empty() ? "/" : walked_, errno);
    made_.add(parent, path);
  }

  void push(int fd, const std::string& name, bool above = true) {
    const std::string path = name.empty() ? walked_ : walked_ + "/" + name;
    if (fd < 0) {
      if (errno == ENOTDIR) throw StorageError("cannot use '" + path + "' as a directory: it is not one");
      fail("open directory", path.empty() ? "/" : path, errno);
    }
    stack_.push_back(fd);
    walked_ = path;
    if (above) refuse_if(ancestor_doubt(status_of(fd), rules_), path.empty() ? "/" : path, false);
  }

  void pop() {
    ::close(stack_.back());
    stack_.pop_back();
    walked_ = walked_.substr(0, walked_.rfind('/'));
  }

  struct stat status_of(int fd) const {
    struct stat status {};
    if (::fstat(fd, &status) != 0) fail("inspect", walked_.empty() ? "/" : walked_, errno);
    return status;
  }

  void refuse_if(const std::string& doubt, const std::string& path, bool itself) const {
    if (doubt.empty()) return;
    const std::string which = itself ? "the directory" : "the directory '" + path + "' above it";
    throw StorageError("cannot use the directory '" + target_ + "': " + which + " " + doubt +
                       ", so another user could read, replace or plant its files; " +
                       (itself ? "remove it or give a path of your own"
                               : "give a path whose directories belong to you or root") +
                       (doubt.find("group") == std::string::npos || rules_.shared_group
                            ? ""
                            : " (or allow a directory shared with your group in the configuration)"));
  }

  std::string target_;
  const DirectoryRules& rules_;
  std::vector<int> stack_;
  std::string walked_;
  int links_ = 0;
  UnsyncedParents made_;  // of the directories the walk made
};

class PosixDirectory final : public Directory {
 public:
  PosixDirectory(int fd, std::string path, const DirectoryRules& rules, const SystemCalls& calls, UnsyncedParents made)
      : fd_(fd), path_(std::move(path)), rules_(rules), calls_(calls), made_(std::move(made)) {
    struct stat status {};
    ::fstat(fd_, &status);
    group_ = status.st_gid;
  }
  ~PosixDirectory() override { ::close(fd_); }

  const std::string& path() const override { return path_; }
  std::unique_ptr<WritableFile> create(const std::string& name, unsigned mode) override {
    return writable_file(::openat(fd_, name.c_str(), kCreateFlags, mode), join(name), mode, calls_);
  }
  std::unique_ptr<ReadableFile> open(const std::string& name) override {
    const std::string path = join(name);
    const int fd = opened_or_fail(::openat(fd_, name.c_str(), kReadFlags), path);
    const struct stat status = regular_file_status(fd, path);
    const bool owner_accepted = status.st_uid == ::geteuid() || (rules_.shared_group && status.st_gid == group_);
    if (!owner_accepted) {
      ::close(fd);
      throw StorageError("cannot read '" + path + "': it belongs to user " + std::to_string(status.st_uid) +
                         ", not to you; a store reads only its own files (remove it, or allow a directory shared "
                         "with your group in the configuration)");
    }
    return readable_file(fd, path, status, calls_);
  }
  std::unique_ptr<PositionalFile> open_positional(const std::string& name) override {
    return positional_file(::openat(fd_, name.c_str(), kPositionalFlags), join(name), calls_);
  }
  void rename(const std::string& from, const std::string& to) override {
    if (::renameat(fd_, from.c_str(), fd_, to.c_str()) != 0) fail("rename to '" + join(to) + "'", join(from), errno);
  }
  // Written only once checked: a file put in its place between the rename
  // and the open (in a directory shared with the group) is left as it is.
  std::unique_ptr<WritableFile> reuse(const std::string& from, const std::string& to, unsigned mode) override {
    if (::renameat2(fd_, from.c_str(), fd_, to.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno != EINVAL && errno != ENOSYS) fail("rename to '" + join(to) + "'", join(from), errno);
      return Directory::reuse(from, to, mode);  // no RENAME_NOREPLACE here (some network file systems)
    }
    return overwritten_file(::openat(fd_, to.c_str(), kPositionalFlags), join(to), mode, calls_);
  }
  bool rename_new(const std::string& from, const std::string& to) override {
    if (::renameat2(fd_, from.c_str(), fd_, to.c_str(), RENAME_NOREPLACE) == 0) return true;
    if (errno == EEXIST) return false;
    if (errno != EINVAL && errno != ENOSYS) fail("rename to '" + join(to) + "'", join(from), errno);
    // A file system without RENAME_NOREPLACE (some network ones): a hard
    // link fails just the same when the name exists.
    if (::linkat(fd_, from.c_str(), fd_, to.c_str(), 0) != 0) {
      if (errno == EEXIST) return false;
      fail("link to '" + join(to) + "'", join(from), errno);
    }
    remove(from);
    return true;
  }
  void remove(const std::string& name) override {
    if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT) fail("remove", join(name), errno);
  }
  // The parents of the directories made for this one first: their entries
  // need to be durable only once something in this directory is, and
  // syncing them here keeps them off open's path (a store prepares its
  // directory on its first checkpoint's path).
  void sync() override {
    made_.sync(calls_);
    sync_directory(fd_, path_, calls_);
  }
  std::vector<std::string> list() override {
    const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("list directory", path_, errno);
    return list_directory(fd, path_);
  }
  bool exists(const std::string& name) override {
    struct stat status {};
    return ::fstatat(fd_, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0;
  }
  std::unique_ptr<FileLock> lock(const std::string& name) override {
    return lock_file(join(name), [&] { return ::openat(fd_, name.c_str(), kLockFlags, 0600); });
  }

 private:
  std::string join(const std::string& name) const { return path_ + "/" + name; }

  int fd_;
  std::string path_;
  DirectoryRules rules_;
  gid_t group_ = 0;
  SystemCalls calls_;
  UnsyncedParents made_;
};

}  // namespace

std::unique_ptr<Directory> open_posix_directory(const std::string& path, const DirectoryRules& rules,
                                                const SystemCalls& calls) {
  PathWalk walk(path, rules);
  const int fd = walk.open();
  return std::make_unique<PosixDirectory>(fd, path, rules, calls, walk.take_made());
}

}  // namespace resurgo
