// CollectiveVersions: the job's side of the versions of an MPI store (issue
// 12; DESIGN.md, "File format"). A version is complete at a level only when
// every rank's container is committed there and then the job manifest
// (format/manifest.h): a two-phase commit.
//
// checkpoint(v) only hands the version over (add); the job's steps for it
// run off the application's path, on a job thread with its own duplicate of
// the communicator: the ranks agree on the version (a mismatch, or a rank
// that does not come within the timeout, fails it on every rank, reported
// by the next call), agree that every rank's copy reached L2 and commit the
// manifest there (rank 0 gathers the ranks' parts; the lowest rank of each
// node writes it in its node's L2, rank 0 in L4), protect the version on L3
// (a hook), and later commit L4 likewise. Every rank runs the same steps in
// the same order, whatever its own timing, so the collectives match. Where
// the communicator may not be called from another thread (MPI without
// MPI_THREAD_MULTIPLE) the steps run inside the store's calls instead: each
// checkpoint() runs those of the versions before it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "format/manifest.h"
#include "resurgo/comm.hpp"
#include "resurgo/errors.hpp"
#include "tier/directory_level.h"

namespace resurgo {

class CollectiveVersions {
 public:
  // What the job's steps need from the store; called on the job thread.
  struct Hooks {
    // This rank's copy of `version` at `level`: 1 reached, -1 failed (or
    // given up), 0 still on its way.
    std::function<int(int version, int level)> outcome;
    // Until this rank's copy of `version` has settled at `level`.
    std::function<void(int version, int level)> settle;
    // `version` is complete on L2 (its manifest written): protect it on L3.
    // Collective over the job communicator it is given.
    // `started`: when checkpoint() was called.
    std::function<void(int version, std::chrono::steady_clock::time_point started, Comm& job)> complete_at_local;
    // `version`, which goes to no directory level (kept only in memory), is
    // a version of the job: keep it in partner memory (optional; collective
    // over the job communicator it is given).
    std::function<void(int version, Comm& job)> in_memory;
  };

  // Collective: every rank of `comm` constructs it (the store's open).
  // `node` is this rank's.
  // `store_id`: the store's identity (hex), recorded in each manifest.
  CollectiveVersions(Comm& comm, int node, std::string store, std::string store_id, Hooks hooks, const Logger& log,
                     double timeout_seconds);
  ~CollectiveVersions();  // stops the job thread after the steps of the versions added
  CollectiveVersions(const CollectiveVersions&) = delete;
  CollectiveVersions& operator=(const CollectiveVersions&) = delete;

  // persistent.layout = shared: each version's L4 files are packed into one
  // file before its manifest is written (job/shared_version.h). Set before
  // the first add().
  void write_shared_files() { shared_files_ = true; }

  bool alone() const { return comm_.size() == 1; }
  bool on_job_thread() const { return job_comm_ != nullptr; }
  int node_of(int rank) const { return nodes_[static_cast<std::size_t>(rank)]; }
  const std::vector<int>& nodes() const { return nodes_; }

  // checkpoint(version), after the capture: this rank's copy goes to
  // `levels` (L2, L4: the directory levels of its route); `layout` is its
  // regions. Returns at once (on the job thread's side), or runs the steps
  // of the versions added before (inline).
  void add(int version, std::chrono::steady_clock::time_point started, std::vector<DirectoryLevel*> levels,
           std::vector<format::ManifestRegion> layout);
  // checkpoint(version) failed on this rank before the capture: the job
  // still takes its step for it (the ranks' steps must match), and the
  // version fails on every rank; the other ranks report it at their next call.
  void add_failed(int version);
  // Until the steps of every version added have run (so each is decided
  // at L2), and with `persistent` until each is decided at L4 too (wait,
  // close, latest, restart: calls every rank makes after the same
  // checkpoints, with the same argument).
  void drain(bool persistent);
  // Throws the oldest job failure not reported yet (versions that
  // disagreed, a rank that did not come), prefixed by `prefix`.
  void report_failure(const std::string& prefix);

  // Whether the job decided that `version` is not complete at `level`.
  bool failed(int version, int level);
  // Whether any version failed at `level` since the previous call.
  bool take_failures(int level);

  // On the application thread (restart, latest): the newest of
  // `candidates` (this rank's) that every rank holds, or -1
  // (base/newest_everywhere.h).
  int agree_newest(std::vector<int> candidates);
  // Whether `mine` is true on every rank.
  bool on_every_rank(bool mine) { return alone() ? mine : comm_.allreduce_min(mine ? 1 : 0) == 1; }

 private:
  struct Version {
    int version;
    std::chrono::steady_clock::time_point started;
    std::vector<DirectoryLevel*> levels;
    std::vector<format::ManifestRegion> layout;
    bool failed_here = false;
  };

  // The job's steps, on `job` (the job thread's communicator, or the
  // store's inline).
  void run_steps(const Version& added, Comm& job);
  bool agree_on_version(const Version& added, Comm& job);
  void decide(const Version& added, DirectoryLevel& level, Comm& job, bool block);
  void decide_persistent(Comm& job, bool block);
  // Whether the manifest was written by every rank that writes one (the
  // same answer on every rank): a version whose manifest is missing is no
  // version of the job, so it must fail, not be reported durable.
  bool commit_manifest(const Version& added, DirectoryLevel& level, Comm& job);
  void drop_rank_file(int version, DirectoryLevel& level, Comm& job);
  // The L4 level among `levels` whose commits get slots in the versions'
  // shared files (job/shared_version.h), or none.
  DirectoryLevel* shared_slot_level(const std::vector<DirectoryLevel*>& levels) const;
  void record_failure(int version, ErrorCode code, const std::string& message);
  void guarded(int version, const std::function<void()>& step);
  void hand_over(Version added);
  void job_loop();

  Comm& comm_;
  std::unique_ptr<Comm> job_comm_;  // the job thread's; none inline
  std::string store_;
  std::string store_id_;
  Hooks hooks_;
  const Logger& log_;
  double timeout_seconds_;
  std::vector<int> nodes_;  // by rank
  bool shared_files_ = false;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Version> added_;             // steps not run yet
  std::deque<Version> persistent_;        // L4 not decided yet (job thread or inline only)
  std::set<std::pair<int, int>> failed_;  // (version, level) the job gave up
  std::set<int> unreported_failure_levels_;
  std::deque<std::pair<ErrorCode, std::string>> failures_;  // not reported yet
  bool out_of_step_ = false;  // a rank did not come: no further collective step
  bool draining_ = false;  // a drain of L4 is requested
  bool busy_ = false;      // the job thread is inside a step
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace resurgo
