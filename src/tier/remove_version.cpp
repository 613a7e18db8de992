// remove_version(): `resurgo rm` through the level code and the store's lock.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "resurgo/errors.hpp"
#include "format/file_names.h"
#include "resurgo/resurgo.hpp"
#include "tier/directory_level.h"

namespace resurgo {

namespace {

// The versions of the tier's rank whose chain goes through `version`
// (directly or through other deltas), ascending. A damaged file names no
// base: its chain is broken already.
std::vector<int> dependents_of(DirectoryLevel& tier, int version) {
  std::vector<int> found;
  for (int candidate : tier.versions()) {
    if (candidate <= version) continue;  // a base is older than its deltas
    const std::optional<int> base = tier.base_of(candidate);
    if (base && (*base == version || std::binary_search(found.begin(), found.end(), *base))) {
      found.push_back(candidate);
    }
  }
  return found;
}

std::string list_text(const std::set<int>& versions) {
  std::string text;
  for (int version : versions) text += (text.empty() ? "" : ", ") + std::to_string(version);
  return text;
}

}  // namespace

std::vector<int> remove_version(const std::string& store_dir, int version, std::shared_ptr<Env> env,
                                bool with_dependents) {
  if (!env) env = Env::posix();
  std::set<int> ranks;
  for (const std::string& name : env->list_dir(store_dir)) {
    int file_version = 0;
    int rank = 0;
    if (format::parse_container_file_name(name, file_version, rank) && file_version == version) ranks.insert(rank);
    // Rank 0's level removes a version's shared file (persistent.layout = shared).
    if (format::parse_shared_file_name(name, file_version) && file_version == version) ranks.insert(0);
  }
  if (ranks.empty()) {
    throw NotFoundError("no file of version " + std::to_string(version) + " in " + store_dir);
  }
  const std::filesystem::path dir(store_dir);
  const std::string root = dir.parent_path().string();
  const std::string store = dir.filename().string();
  // A store open on this directory as its L2 holds its rank's lock: removing
  // a file under it would race with its eviction and restart. Every lock is
  // held until the end, so the dependents found are the ones removed.
  std::vector<std::unique_ptr<FileLock>> locks;
  std::map<int, std::vector<int>> dependents;  // rank -> versions
  std::set<int> all_dependents;
  for (int rank : ranks) {
    DirectoryLevel tier(0, root, store, rank, 0600, 0, env);
    if (env->exists(store_dir + "/" + format::lock_file_name(rank))) locks.push_back(tier.lock());
    dependents[rank] = dependents_of(tier, version);
    all_dependents.insert(dependents[rank].begin(), dependents[rank].end());
  }
  if (!all_dependents.empty() && !with_dependents) {
    throw InvalidArgumentError("version " + std::to_string(version) + " in " + store_dir +
                               " is the base of version(s) " + list_text(all_dependents) +
                               ": removing it would break their chains; remove them first, or remove them "
                               "with it (with_dependents; resurgo rm --with-dependents)");
  }
  for (int rank : ranks) {
    DirectoryLevel tier(0, root, store, rank, 0600, 0, env);
    // Newest first: an interruption leaves no delta without its base.
    const std::vector<int>& doomed = dependents[rank];
    for (auto dependent = doomed.rbegin(); dependent != doomed.rend(); ++dependent) tier.remove(*dependent);
    tier.remove(version);
  }
  std::vector<int> removed(all_dependents.rbegin(), all_dependents.rend());
  removed.push_back(version);
  return removed;
}

}  // namespace resurgo
