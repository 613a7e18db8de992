// CollectiveVersions: the job's side of the versions of an MPI store (issue
// 12; DESIGN.md, "File format"). A version is complete at a level only when
// every rank's container is committed there and then the job manifest
// (format/manifest.h): a two-phase commit. Ranks agree on each version they
// checkpoint, on the progress of every version through the levels (at the
// store calls every rank makes: checkpoint, wait, close), and at restart on
// the newest version every rank can restore, falling back together. All of
// it runs on the application thread; manifests are written by a background
// thread of the ranks that write them (rank 0 for L4, the lowest rank of
// each node for its L2), which calls no MPI.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "format/manifest.h"
#include "resurgo/comm.hpp"
#include "tier/directory_tier.h"

namespace resurgo {

class CollectiveVersions {
 public:
  // Collective: every rank of `comm` constructs it (the store's open);
  // `node` is this rank's.
  CollectiveVersions(Comm& comm, int node, std::string store, const Logger& log, double timeout_seconds);
  ~CollectiveVersions();  // writes the manifests queued, then stops the writer
  CollectiveVersions(const CollectiveVersions&) = delete;
  CollectiveVersions& operator=(const CollectiveVersions&) = delete;

  bool alone() const { return comm_.size() == 1; }
  int node_of(int rank) const { return nodes_[static_cast<std::size_t>(rank)]; }

  // At checkpoint(version), before anything is captured: the same version on
  // every rank, else InvalidArgumentError on every rank naming the versions;
  // StateError naming the ranks that did not call within the timeout.
  void agree_on_version(int version);

  // This rank's copy of `version` goes to `level`; `regions` is its layout.
  void expect(int version, DirectoryTier& level, std::vector<format::ManifestRegion> regions);

  // Whether this rank's copy of a version reached a level: 1 reached, -1
  // failed (or given up), 0 not settled yet.
  using Outcome = std::function<int(int version, int level)>;
  // Commits the manifest of each expected version that every rank has
  // settled, oldest first per level, and drops those that failed on some
  // rank (they are not versions of the job there). With `settle` (wait,
  // close) it first waits for each expected version to settle here, so
  // every expected version is decided on return.
  void progress(const Outcome& outcome, const std::function<void(int version, int level)>& settle = nullptr);
  // Whether the job decided that `version` failed at `level` (some rank
  // could not write it there), for wait() on the ranks where it succeeded.
  bool failed(int version, int level) const { return failed_.count({version, level}) > 0; }
  // Whether any version failed at `level` since the previous call.
  bool take_failures(int level);
  // Until the manifests this rank writes are durable; then a barrier, after
  // which every rank sees them.
  void flush();

  // Restart: the newest of `candidates` (this rank's) that every rank
  // holds, or -1 when none is common to all.
  int agree_newest(std::vector<int> candidates);
  // Whether `mine` is true on every rank.
  bool on_every_rank(bool mine) { return alone() ? mine : comm_.allreduce_min(mine ? 1 : 0) == 1; }

 private:
  struct Expected {
    int version;
    DirectoryTier* level;
    std::vector<format::ManifestRegion> regions;
  };
  struct Write {
    DirectoryTier* level;
    int version;
    std::string text;
  };

  void commit_manifest(const Expected& expected);
  std::vector<std::string> gather_at_root(const std::string& mine);
  void write_in_background(Write write);
  void write_loop();

  Comm& comm_;
  std::string store_;
  const Logger& log_;
  double timeout_seconds_;
  std::vector<int> nodes_;  // by rank
  std::map<int, std::deque<Expected>> expected_;  // by level number
  std::set<std::pair<int, int>> failed_;          // (version, level) the job gave up
  std::set<int> unreported_failure_levels_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Write> writes_;
  bool writing_ = false;
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace resurgo
