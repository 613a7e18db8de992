#include "tier/directory_level.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/crash_point.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/manifest.h"
#include "resurgo/errors.hpp"
#include "tier/eviction.h"

namespace resurgo {

namespace {
std::string parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

DirectoryLevel::DirectoryLevel(int level, std::string root, const std::string& store, int rank, unsigned mode,
                             int keep, std::shared_ptr<Env> env)
    : level_(level), dir_(std::move(root) + "/" + store), rank_(rank), mode_(mode), keep_(keep), env_(std::move(env)) {}

std::string DirectoryLevel::path(int version) const { return dir_ + "/" + format::container_file_name(version, rank_); }

std::string DirectoryLevel::temporary_path(int version) const {
  return dir_ + "/" + format::temporary_file_name(format::container_file_name(version, rank_), ::getpid());
}

namespace {

// Whether process `pid` can still write: it exists (kill(pid, 0) answers, or
// it belongs to another user) and is not a zombie. An exited process that is
// not reaped yet still answers kill(pid, 0); a forked writer killed with its
// application stays one until init reaps it (forever where pid 1 does not).
bool process_alive(int pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno != EPERM)) return false;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::FILE* stat = std::fopen(path, "r");
  if (stat == nullptr) return true;  // no /proc: trust kill()
  char state = '?';
  // "pid (comm) state ...": comm may hold spaces and parentheses; the state follows the last ')'.
  char line[512];
  const std::size_t got = std::fread(line, 1, sizeof line - 1, stat);
  std::fclose(stat);
  line[got] = '\0';
  if (const char* close = std::strrchr(line, ')'); close != nullptr && close[1] == ' ') state = close[2];
  return state != 'Z' && state != 'X';
}

}  // namespace

// A directory's entry lives in its parent, so fsyncing the directory after
// a commit does not make the directory itself durable: each one created
// here has its parent synced, or a power loss could take it away with every
// version committed in it (power-loss campaign, POSIX semantics).
void DirectoryLevel::create_directory_durably() {
  std::vector<std::string> missing;
  for (std::string dir = dir_; dir != "/" && dir != "." && !env_->exists(dir); dir = parent_directory(dir)) {
    missing.push_back(dir);
  }
  env_->create_dirs(dir_);
  for (auto created = missing.rbegin(); created != missing.rend(); ++created) {
    try {
      env_->sync_dir(parent_directory(*created));
    } catch (const StorageError& error) {
      throw StorageError("cannot make the new directory '" + *created + "' durable: " + error.what());
    }
  }
}

void DirectoryLevel::prepare() {
  create_directory_durably();
  const std::string rank_part = format::container_file_name(0, rank_).substr(11);  // ".r000003.rsg"
  for (const std::string& name : env_->list_dir(dir_)) {
    const std::optional<int> pid = format::temporary_owner(name);
    const bool ours = name.find(rank_part) != std::string::npos || name.find(".job-r") != std::string::npos;
    if (!pid || !ours) continue;
    const bool owner_alive = *pid != ::getpid() && process_alive(*pid);
    if (owner_alive) continue;
    env_->remove(dir_ + "/" + name);
    RESURGO_CRASH_POINT("prepare.removed_temporary", level_);
  }
}

void DirectoryLevel::commit(int version, const std::function<void(WritableFile&)>& write) {
  commit_file(path(version), temporary_path(version), write);
}

void DirectoryLevel::commit_file(const std::string& final_path, const std::string& temporary,
                                const std::function<void(WritableFile&)>& write) {
  bool renamed = false;
  try {
    std::unique_ptr<WritableFile> file = env_->create(temporary, mode_);
    RESURGO_CRASH_POINT("commit.created", level_);
    write(*file);
    RESURGO_CRASH_POINT("commit.written", level_);
    file->sync();
    file->close();
    RESURGO_CRASH_POINT("commit.synced", level_);
    env_->rename(temporary, final_path);
    renamed = true;
    RESURGO_CRASH_POINT("commit.renamed", level_);
    env_->sync_dir(dir_);
    RESURGO_CRASH_POINT("commit.done", level_);
  } catch (...) {
    // A failed commit must not leave a version whose durability is unknown
    // visible; a leftover temporary is invisible and prepare() removes it.
    try {
      env_->remove(renamed ? final_path : temporary);
    } catch (const Error&) {
    }
    throw;
  }
}

Level::Features DirectoryLevel::features() const {
  Features features;
  features.node_local = level_ <= 2;
  features.collective = collective_;
  return features;
}

void DirectoryLevel::commit_copy(int version, const ReadableFile& source) {
  const format::Container container = format::read_container(source);
  format::check_identity(container, source.path(), "", version, rank_);
  commit(version, [&](WritableFile& file) { format::copy_verified(source, container, file); });
}

std::vector<int> DirectoryLevel::versions() {
  std::vector<int> found;
  for (const std::string& name : env_->list_dir(dir_)) {
    int version = 0;
    int rank = 0;
    if (format::parse_container_file_name(name, version, rank) && rank == rank_) found.push_back(version);
  }
  std::sort(found.begin(), found.end());
  return found;
}

bool DirectoryLevel::holds(int version) { return env_->exists(path(version)); }

std::unique_ptr<ReadableFile> DirectoryLevel::open(int version) { return env_->open(path(version)); }

void DirectoryLevel::remove(int version) {
  env_->remove(path(version));
  env_->sync_dir(dir_);
}

void DirectoryLevel::quarantine(int version) {
  env_->rename(path(version), path(version) + format::kDamagedSuffix);
  RESURGO_CRASH_POINT("quarantine.renamed", level_);
  env_->sync_dir(dir_);
}

std::vector<int> DirectoryLevel::evict(const std::function<bool(int)>& pinned, const std::map<int, int>& known_bases) {
  // A damaged file names no base and pins nothing; an unreadable one throws
  // before anything is removed.
  const auto base = [&](int version) { return base_of(version, known_bases); };
  const std::vector<int> listed = versions();
  std::function<bool(int)> kept = pinned;
  if (collective_) {
    const std::vector<int> manifests = manifest_versions();
    const int newest_complete = manifests.empty() ? -1 : manifests.back();
    kept = [&](int version) { return version >= newest_complete || pinned(version); };
  }
  std::vector<int> removed;
  for (int version : versions_to_evict(listed, keep_, kept, base)) {
    env_->remove(path(version));
    RESURGO_CRASH_POINT("evict.removed", level_);
    removed.insert(removed.begin(), version);
  }
  // The manifests of versions older than every one this rank keeps go too
  // (the other ranks remove their files in their own evictions).
  const auto oldest_kept = std::find_if(listed.begin(), listed.end(), [&](int version) {
    return std::find(removed.begin(), removed.end(), version) == removed.end();
  });
  if (collective_ && !removed.empty() && oldest_kept != listed.end()) {
    for (int version : manifest_versions()) {
      if (version < *oldest_kept) remove_manifest(version);
    }
  }
  // No directory fsync: an evicted file that reappears after a crash is an
  // intact older version, harmless, and the next eviction removes it.
  return removed;
}

void DirectoryLevel::commit_manifest(int version, const std::string& text) {
  const std::string name = format::manifest_file_name(version);
  // The rank in the temporary's name keeps apart the writers of one
  // directory (fake nodes sharing it, or ranks that are threads).
  commit_file(dir_ + "/" + name, dir_ + "/" + format::temporary_file_name(name, ::getpid(), rank_),
              [&](WritableFile& file) { file.append(text.data(), text.size()); });
}

std::optional<std::string> DirectoryLevel::read_manifest(int version) {
  return format::read_manifest_file(*env_, dir_ + "/" + format::manifest_file_name(version));
}

std::vector<int> DirectoryLevel::manifest_versions() {
  std::vector<int> found;
  for (const std::string& name : env_->list_dir(dir_)) {
    int version = 0;
    if (format::parse_manifest_file_name(name, version)) found.push_back(version);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void DirectoryLevel::remove_manifest(int version) { env_->remove(dir_ + "/" + format::manifest_file_name(version)); }

}  // namespace resurgo
