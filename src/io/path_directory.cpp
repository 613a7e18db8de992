// Env::open_directory's default: a Directory that joins names to its path
// and calls the Env's path methods, for the Envs that wrap another to
// inject faults or to simulate a power loss. It checks nothing: the POSIX
// Env's own directories do (posix_directory.h). Env::open_positional's
// default, which such a Directory may reach, refuses here too.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/fork_safe_lock.h"
#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Creates what is missing of `path` and returns the directories created,
// outermost first. A directory's entry lives in its parent, so fsyncing the
// directory after a commit does not make the directory itself durable: each
// one created here has its parent synced by the directory's first sync()
// (below), or a power loss could take it away with every version committed
// in it (power-loss campaign, POSIX semantics).
std::vector<std::string> create_missing(Env& env, const std::string& path) {
  std::vector<std::string> missing;
  for (std::string dir = path; dir != "/" && dir != "." && !env.exists(dir); dir = parent_directory(dir)) {
    missing.insert(missing.begin(), dir);
  }
  env.create_dirs(path);
  return missing;
}

// The Env must outlive the directory (a store holds both).
class PathDirectory final : public Directory {
 public:
  PathDirectory(Env& env, std::string path, std::vector<std::string> made)
      : env_(env), path_(std::move(path)), made_(std::move(made)) {}

  const std::string& path() const override { return path_; }
  std::unique_ptr<WritableFile> create(const std::string& name, unsigned mode) override {
    return env_.create(join(name), mode);
  }
  std::unique_ptr<ReadableFile> open(const std::string& name) override { return env_.open(join(name)); }
  std::unique_ptr<PositionalFile> open_positional(const std::string& name) override {
    return env_.open_positional(join(name));
  }
  void rename(const std::string& from, const std::string& to) override { env_.rename(join(from), join(to)); }
  bool rename_new(const std::string& from, const std::string& to) override {
    if (env_.exists(join(to))) return false;
    env_.rename(join(from), join(to));
    return true;
  }
  void remove(const std::string& name) override { env_.remove(join(name)); }
  // The parents of the directories made for this one first: their entries
  // need to be durable only once something in this directory is, and
  // syncing them here keeps them off open's path (a store prepares its
  // directory on its first checkpoint's path).
  void sync() override {
    sync_made_parents();
    env_.sync_dir(path_);
  }
  std::vector<std::string> list() override { return env_.list_dir(path_); }
  bool exists(const std::string& name) override { return env_.exists(join(name)); }
  std::unique_ptr<FileLock> lock(const std::string& name) override { return env_.lock(join(name)); }

 private:
  std::string join(const std::string& name) const { return path_ + "/" + name; }

  void sync_made_parents() {
    std::lock_guard guard(made_lock_);
    while (!made_.empty()) {
      try {
        env_.sync_dir(parent_directory(made_.front()));
      } catch (const StorageError& error) {
        throw StorageError("cannot make the new directory '" + made_.front() + "' durable: " + error.what());
      }
      made_.erase(made_.begin());
    }
  }

  Env& env_;
  std::string path_;
  ForkSafeLock made_lock_;  // a forked writer syncs in a child (io/fork_safe_lock.h)
  std::vector<std::string> made_;  // made by open_directory, parents not synced yet
};

}  // namespace

std::unique_ptr<Directory> Env::open_directory(const std::string& path, const DirectoryRules& rules) {
  if (!rules.create && !exists(path)) throw NotFoundError("no directory '" + path + "'");
  return std::make_unique<PathDirectory>(*this, path, rules.create ? create_missing(*this, path) : std::vector<std::string>{});
}

std::unique_ptr<PositionalFile> Env::open_positional(const std::string& path) {
  throw StorageError("cannot write '" + path + "' at offsets: this Env only appends to files, so it cannot hold "
                     "persistent.layout = shared; use the POSIX Env or persistent.layout = per-rank");
}

}  // namespace resurgo
