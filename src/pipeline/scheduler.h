// Scheduler: moves captured versions through the levels of their route
// (DESIGN.md, "Data flow and modules"). The levels come from the Route: L1,
// L2, L4 in order, each with `every` (the n-th checkpoints it takes) and
// `keep`. Each level has one worker thread with a
// queue: the first level of a version's route writes its Snapshot, every
// later one copies it from the level before (verifying every chunk).
// Versions waiting together in a queue are committed as one group
// (Level::commit_group: one durable flush for all on a directory level). An
// eviction thread removes surplus versions, never while a capture runs and
// never a version a later level still has to copy; a bounded level (memory)
// that is full evicts on its worker's thread before it gives a version up.
// The eviction thread also compacts long delta chains (pipeline/compactor.h),
// at low priority, and starts none while a capture runs. Outcomes go to the Catalog.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "capture/snapshot.h"
#include "core/catalog.h"
#include "pipeline/in_flight.h"
#include "base/log.h"
#include "base/trace.h"
#include "base/thread_pool.h"
#include "tier/level.h"
#include "tier/route.h"

namespace resurgo {

class Scheduler {
 public:
  using Step = Route::Step;
  // The levels that may hold a version now (Route::readable: a directory
  // level not prepared holds nothing of this store's, and is not opened).
  using Holders = std::function<std::vector<Level*>()>;

  // `steps` in route order (Route::scheduled); at least one takes checkpoints.
  // `delta.compact_after` > 0: compaction of the chains on L2 and L4.
  // `holders`: where discard() looks; by default the steps' levels.
  Scheduler(std::vector<Step> steps, const Config::Pipeline& pipeline, ThreadPool& pool, Catalog& catalog,
            const Logger& log, Trace& trace, const Config::Delta& delta = {}, Holders holders = {});
  ~Scheduler();  // drains, then stops the threads
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Hands a captured version to the first level of `route` (Route::levels_for).
  void submit(int version, std::vector<Level*> route, Snapshot snapshot);
  // Until every submitted version has settled and no eviction or
  // compaction is due or running.
  void drain();
  // Runs an eviction soon, though no version reached a level: an MPI
  // store's levels keep versions until the job completes newer ones.
  void request_eviction();
  // While true, evictions wait (they would compete with the capture).
  void set_capturing(bool capturing);
  // Removes `version` from every level once its writes have settled, on the
  // eviction thread: the caller (Store::discard) pays no file removal. A
  // level keeps it while a version there that is not discarded builds on it
  // (delta chains); the discard that frees it removes it. A discard that
  // leaves the eviction thread nothing to remove does not wake it
  // (nothing_to_remove).
  void discard(int version);
  // Restart of a version still on its way to its first level, a durable
  // one, while the capture's buffer holds it whole (InFlightVersions):
  // calls `read` with its bytes there; false when the version is not such
  // a one (any more). Versions are kept readable from the first call on:
  // a store that never restarts a version it is still writing (all but an
  // adjoint's) pays no copy of each version's header at checkpoint.
  bool read_in_flight(int version, const InFlightVersions::Reader& read) {
    serve_in_flight_.store(true, std::memory_order_relaxed);
    return in_flight_.read(version, read);
  }

 private:
  struct Task {
    int version = 0;
    std::vector<Level*> route;  // the version's whole route
    std::size_t step = 0;       // index in `route` of the level this job goes to
    Snapshot snapshot;          // for the first level only
    bool readable_in_flight = false;  // in in_flight_ until its first level settles
  };
  struct CompactionTask {
    int version = 0;
    Level* level = nullptr;
  };
  struct Worker {
    Level* level = nullptr;
    bool copies_only = false;  // every version reached an earlier level first
    std::deque<Task> queue;
    std::size_t busy = 0;  // versions its thread (or the caller standing in for it) is writing
    std::condition_variable has_work;  // its thread waits on it alone
    std::thread thread;
  };

  static bool writes_on_caller(const Snapshot& snapshot);
  static bool readable_in_flight(const Task& task);
  void run_on_caller(Task& task, Worker& worker);
  void work(Worker& worker);
  // The front of the worker's queue: one task, or the tasks that can be
  // committed together with it (the caller holds mutex_).
  std::vector<Task> take_group(Worker& worker);
  static bool joins_groups(const Task& task);
  // Writes the job's step and settles it in the catalog. `on_caller`: the
  // application's thread runs it (run_on_caller), and a memory level's
  // eviction runs there too, waking no thread.
  void run(Task& job, bool on_caller = false);
  // Writes the jobs' step (one level) as one group commit, then settles each.
  void run_group(std::vector<Task>& jobs);
  // After the job's step: the catalog, eviction, compaction, the next level.
  // `failure` is the Error that stopped the write, if any.
  void settle(Task& job, const std::exception_ptr& failure, std::uint64_t stored, Clock::time_point started,
              bool on_caller);
  void request_eviction_locked();  // the caller holds mutex_
  std::uint64_t write(Task& job, Clock::time_point& started, bool on_caller);
  void commit_when_room(Task& job, Level& level, const std::function<void(WritableFile&)>& write, bool on_caller);
  void wait_for_backlog(const Task& job, bool on_caller);
  bool wait_for_a_copy(const Task& job, bool on_caller);
  std::size_t backlog(const Level* level) const;  // the caller holds mutex_
  Worker& worker_of(const Level* level);
  void evict_loop();
  void evict();
  bool wants_compaction(int version, Level& level);
  void compact(const CompactionTask& task);
  // The bases of the copies on `level` of the versions the catalog knows
  // (this process wrote them).
  KnownBases known_bases(const Level& level);
  // One level's eviction; returns the versions removed (none on failure, logged).
  std::vector<int> evict(Level& level, const KnownBases& bases);
  bool nothing_to_remove(int version);
  void remove_everywhere(int version);
  void remove_discarded();
  bool remove_unless_needed(int version);
  bool needed_on(Level& level, int base, const KnownBases& bases);
  bool may_be_a_base(int version);  // false: no version can build on it, needed_on need not look

  std::vector<Step> steps_;
  Config::Pipeline pipeline_;
  int compact_after_ = 0;
  double compact_share_ = 1;
  InFlightVersions in_flight_;
  std::atomic<bool> serve_in_flight_{false};  // read_in_flight was called
  std::atomic<int> drains_{0};  // drain() calls under way
  Holders holders_;
  ThreadPool& pool_;
  Catalog& catalog_;
  const Logger& log_;
  Trace& trace_;

  // One condition variable per kind of waiter, so that a checkpoint wakes
  // only the thread that has work: each worker its own (Worker::has_work),
  // the eviction thread `eviction_wanted_`, and `changed_` for the callers
  // that wait for the pipeline's state (drain, the backlog bound).
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable eviction_wanted_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool eviction_due_ = false;
  std::deque<int> discards_;
  std::deque<CompactionTask> compactions_;  // run by the eviction thread, oldest first
  std::set<int> discarded_;  // eviction thread: discarded, still on a level as another version's base
  bool kept_discarded_ = false;  // discarded_ is not empty: a copy the eviction thread keeps under mutex_
  bool evicting_ = false;  // the eviction thread removes or compacts
  bool lowered_ = false;   // eviction thread: its priority lowered for compaction
  bool capturing_ = false;
  int first_version_ = -1;    // the first version submitted: the levels held only older ones before
  bool wrote_delta_ = false;  // a delta was submitted
  bool stopping_ = false;
  std::thread evictor_;
};

}  // namespace resurgo
