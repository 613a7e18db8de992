// remove_version(): `resurgo rm` through the level code and the store's lock.
#include <cstdio>
#include <filesystem>
#include <set>

#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "tier/directory_tier.h"

namespace resurgo {

void remove_version(const std::string& store_dir, int version, std::shared_ptr<Env> env) {
  if (!env) env = Env::posix();
  std::set<int> ranks;
  for (const std::string& name : env->list_dir(store_dir)) {
    int file_version = 0;
    int rank = 0;
    if (parse_container_file_name(name, file_version, rank) && file_version == version) ranks.insert(rank);
  }
  if (ranks.empty()) {
    throw NotFoundError("no file of version " + std::to_string(version) + " in " + store_dir);
  }
  const std::filesystem::path dir(store_dir);
  const std::string root = dir.parent_path().string();
  const std::string store = dir.filename().string();
  for (int rank : ranks) {
    // A store open on this directory as its L2 holds this lock: removing a
    // file under it would race with its eviction and restart.
    char lock_name[32];
    std::snprintf(lock_name, sizeof lock_name, "/.lock.r%06d", rank);
    std::unique_ptr<FileLock> lock;
    if (env->exists(store_dir + lock_name)) lock = env->lock(store_dir + lock_name);
    DirectoryTier(0, root, store, rank, 0600, 0, env).remove(version);
  }
}

}  // namespace resurgo
