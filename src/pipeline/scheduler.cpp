#include "pipeline/scheduler.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/thread_priority.h"
#include "base/units.h"
#include "format/container.h"
#include "format/version_writer.h"
#include "pipeline/compactor.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {

// Versions that may wait for their copy to the next level (the one being
// copied included) before a directory level that feeds it waits too. When
// L4 is slower than L2, versions bound for L4 would otherwise pile up on the
// node-local disk, pinned until copied (the stress campaign saw thousands):
// with the bound, L2 keeps L4's pace, and once the buffer is full the
// application sees the wait as backpressure.
// A bounded level (memory) is bounded by its capacity instead: versions
// rest there until the level is full of versions waiting for their copy,
// and only then does the next one wait (commit_when_room). A burst of small
// checkpoints then costs no disk wait, and L2 catches up in groups.
constexpr std::size_t kMaxBacklog = 2;

// Versions one group commit takes at most: each waits for the whole group.
constexpr std::size_t kMaxGroup = 32;

std::vector<Level*> levels_of(const std::vector<Route::Step>& steps) {
  std::vector<Level*> levels;
  for (const Route::Step& step : steps) levels.push_back(step.level);
  return levels;
}

}  // namespace

Scheduler::Scheduler(std::vector<Step> steps, const Config::Pipeline& pipeline, ThreadPool& pool, Catalog& catalog,
                     const Logger& log, Trace& trace, const Config::Delta& delta, Holders holders)
    : steps_(std::move(steps)),
      pipeline_(pipeline),
      compact_after_(delta.compact_after),
      compact_share_(delta.compact_share),
      holders_(std::move(holders)),
      pool_(pool),
      catalog_(catalog),
      log_(log),
      trace_(trace) {
  bool earlier_takes_all = false;
  for (const Step& step : steps_) {
    if (step.every <= 0) continue;
    auto worker = std::make_unique<Worker>();
    worker->level = step.level;
    worker->copies_only = earlier_takes_all;
    workers_.push_back(std::move(worker));
    earlier_takes_all = earlier_takes_all || step.every == 1;
  }
  if (!holders_) {
    holders_ = [levels = levels_of(steps_)] { return levels; };
  }
  for (auto& worker : workers_) worker->thread = std::thread([this, w = worker.get()] { work(*w); });
  evictor_ = std::thread([this] { evict_loop(); });
}

Scheduler::~Scheduler() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  for (auto& worker : workers_) worker->has_work.notify_one();
  eviction_wanted_.notify_one();
  for (auto& worker : workers_) worker->thread.join();
  evictor_.join();
}

Scheduler::Worker& Scheduler::worker_of(const Level* level) {
  for (auto& worker : workers_) {
    if (worker->level == level) return *worker;
  }
  throw StateError("level L" + std::to_string(level->number()) + " has no worker");  // a route from the Route always has one
}

void Scheduler::submit(int version, std::vector<Level*> route, Snapshot snapshot) {
  log_.debug([&] {
    std::string levels;
    for (const Level* level : route) levels += (levels.empty() ? "L" : ", L") + std::to_string(level->number());
    return "version " + std::to_string(version) + " goes to " + levels;
  });
  Task task{version, std::move(route), 0, std::move(snapshot)};
  task.readable_in_flight = serve_in_flight_.load(std::memory_order_relaxed) && readable_in_flight(task);
  if (task.readable_in_flight) in_flight_.add(version, task.snapshot.header, task.snapshot.extents);
  Worker* worker = nullptr;
  bool on_caller = false;
  {
    std::lock_guard lock(mutex_);
    if (first_version_ < 0) first_version_ = version;
    wrote_delta_ = wrote_delta_ || format::is_delta(task.snapshot.header);
    worker = &worker_of(task.route.front());
    on_caller = writes_on_caller(task.snapshot) && !worker->busy && worker->queue.empty();
    if (on_caller) {
      worker->busy = 1;  // the caller stands in for the worker, in its order
    } else {
      worker->queue.push_back(std::move(task));
    }
  }
  if (on_caller) {
    run_on_caller(task, *worker);
  } else {
    worker->has_work.notify_one();
  }
}

// run() reports Errors to the catalog; anything else goes to the caller,
// and the worker is free again either way.
void Scheduler::run_on_caller(Task& task, Worker& worker) {
  struct Release {
    Scheduler& scheduler;
    Worker& worker;
    ~Release() {
      {
        std::lock_guard lock(scheduler.mutex_);
        worker.busy = 0;
      }
      scheduler.changed_.notify_all();  // no system call unless someone waits
    }
  } release{*this, worker};
  run(task, true);
}

// A synchronous version makes the caller wait for its first level anyway:
// writing it on the caller's thread spares two thread hand-offs. Versions
// whose bytes another process writes, or that are staged from a device
// first, stay with the worker.
bool Scheduler::writes_on_caller(const Snapshot& snapshot) {
  return snapshot.synchronous && !snapshot.await_writer && !snapshot.stage;
}

// A full version of host regions whose bytes wait in the capture's buffer
// (released once written) for a durable first level, whose write ends with
// fdatasyncs: a restart copies it from there rather than wait. Other
// versions' bytes are the application's memory (synchronous), a child's or
// a device's, or a delta's blocks; a memory level's write is short.
bool Scheduler::readable_in_flight(const Task& task) {
  const Snapshot& snapshot = task.snapshot;
  if (!snapshot.release || snapshot.synchronous || snapshot.stage || snapshot.await_writer) return false;
  if (format::is_delta(snapshot.header) || task.route.front()->features().is_volatile) return false;
  return std::all_of(snapshot.header.regions.begin(), snapshot.header.regions.end(),
                     [](const format::RegionEntry& region) { return region.kind == format::RegionKind::kHost; });
}

void Scheduler::set_capturing(bool capturing) {
  {
    std::lock_guard lock(mutex_);
    capturing_ = capturing;
  }
  if (!capturing) eviction_wanted_.notify_one();
}

void Scheduler::drain() {
  ++drains_;  // a compaction under way stops pausing
  struct Leave {
    std::atomic<int>& drains;
    ~Leave() { --drains; }
  } leave{drains_};
  catalog_.wait_all_finished();
  std::unique_lock lock(mutex_);
  eviction_wanted_.notify_one();
  changed_.wait(lock, [&] {
    const bool idle = std::all_of(workers_.begin(), workers_.end(),
                                  [](const auto& w) { return w->queue.empty() && !w->busy; });
    return idle && !eviction_due_ && !evicting_ && discards_.empty() && compactions_.empty();
  });
}

std::size_t Scheduler::backlog(const Level* level) const {
  for (const auto& worker : workers_) {
    if (worker->level == level) return worker->queue.size() + worker->busy;
  }
  return 0;
}

// The waits below are backpressure when the application's thread makes them.
void Scheduler::wait_for_backlog(const Task& job, bool on_caller) {
  if (job.step + 1 >= job.route.size() || job.route[job.step]->features().is_volatile) return;
  const Level* next = job.route[job.step + 1];
  const Clock::time_point started = Clock::now();
  std::unique_lock lock(mutex_);
  if (backlog(next) < kMaxBacklog) return;
  changed_.wait(lock, [&] { return backlog(next) < kMaxBacklog; });
  lock.unlock();
  if (on_caller) catalog_.add_backpressure(job.version, seconds_since(started));
}

// Until the next level of the job's route has taken one more version off
// the level before; false at once when no version waits for it.
bool Scheduler::wait_for_a_copy(const Task& job, bool on_caller) {
  if (job.step + 1 >= job.route.size()) return false;
  const Level* next = job.route[job.step + 1];
  const Clock::time_point started = Clock::now();
  std::unique_lock lock(mutex_);
  const std::size_t waiting = backlog(next);
  if (waiting == 0) return false;
  changed_.wait(lock, [&] { return backlog(next) < waiting; });
  lock.unlock();
  if (on_caller) catalog_.add_backpressure(job.version, seconds_since(started));
  return true;
}

void Scheduler::work(Worker& worker) {
  // A level that only copies versions another level already holds (L4
  // behind an L2 that takes every checkpoint) is the least urgent work: the
  // version is safe at the level before meanwhile, and the backlog bound
  // keeps the copies from falling behind for good.
  if (worker.copies_only) lower_this_thread_priority();
  Trace::name_this_thread("level L" + std::to_string(worker.level->number()));
  for (;;) {
    std::vector<Task> jobs;
    {
      std::unique_lock lock(mutex_);
      worker.has_work.wait(lock, [&] { return stopping_ || !worker.queue.empty(); });
      if (worker.queue.empty()) return;
      jobs = take_group(worker);
      worker.busy = jobs.size();
    }
    changed_.notify_all();
    if (jobs.size() == 1) {
      run(jobs.front());
    } else {
      run_group(jobs);
    }
    {
      std::lock_guard lock(mutex_);
      worker.busy = 0;
    }
    changed_.notify_all();
  }
}

std::vector<Scheduler::Task> Scheduler::take_group(Worker& worker) {
  std::vector<Task> jobs;
  do {
    jobs.push_back(std::move(worker.queue.front()));
    worker.queue.pop_front();
  } while (joins_groups(jobs.front()) && !worker.queue.empty() && joins_groups(worker.queue.front()) &&
           jobs.size() < kMaxGroup);
  return jobs;
}

// Copies from the level before, and snapshots a directory level writes as
// their last step. A snapshot bound for a later level waits for that
// level's backlog first (wait_for_backlog), one at a time; a bounded level
// (memory) may be full and evicts before it writes (commit_when_room);
// another process's or a device's bytes are waited for one by one.
bool Scheduler::joins_groups(const Task& task) {
  if (task.step > 0) return true;
  const Snapshot& snapshot = task.snapshot;
  return !snapshot.await_writer && !snapshot.stage && task.step + 1 == task.route.size() &&
         !task.route[task.step]->features().is_volatile;
}

// The first level writes the snapshot (or waits for the process that does);
// the others copy from the level before. A failure ends the version's route.
std::uint64_t Scheduler::write(Task& job, Clock::time_point& started, bool on_caller) {
  Level& level = *job.route[job.step];
  if (job.step > 0) {
    Level& source = *job.route[job.step - 1];
    TraceSpan span(
        trace_, [&] { return "copy L" + std::to_string(source.number()) + " to L" + std::to_string(level.number()); },
        job.version);
    level.commit_copy(job.version, *source.open(job.version));
    return level.open(job.version)->size();
  }
  wait_for_backlog(job, on_caller);
  started = Clock::now();
  TraceSpan span(trace_, [&] { return "write L" + std::to_string(level.number()); }, job.version);
  if (job.snapshot.await_writer) {
    const WrittenVersion written = job.snapshot.await_writer();
    catalog_.set_copy_on_write_bytes(job.version, written.copy_on_write_bytes);
    return written.stored_bytes;
  }
  if (job.snapshot.stage) {
    TraceSpan stage_span(trace_, "stage device regions", job.version);
    job.snapshot.stage(job.snapshot.extents);
  }
  std::uint64_t stored = 0;
  const auto write_snapshot = [&](WritableFile& file) {
    stored = write_extents(file, job.snapshot.header, job.snapshot.extents, pipeline_, pool_);
  };
  commit_when_room(job, level, write_snapshot, on_caller);
  return stored;
}

// The eviction thread waits while captures run: under checkpoints back to
// back it can fall behind the level's keep, and a bounded level fills with
// versions it should no longer hold. Evicting them here first is what keep
// promises. The commit is tried again even when this evicted nothing, since
// the eviction thread may have freed the level since the commit failed. A
// level full of versions waiting for their copy to the next level waits for
// one copy at a time (backpressure), evicting after each; only a level full
// of versions it must keep fails.
void Scheduler::commit_when_room(Task& job, Level& level, const std::function<void(WritableFile&)>& write,
                                 bool on_caller) {
  try {
    level.commit(job.version, write);
    return;
  } catch (const LevelFullError&) {
    evict(level, known_bases(level));
  }
  for (;;) {
    try {
      level.commit(job.version, write);
      return;
    } catch (const LevelFullError&) {
      if (!wait_for_a_copy(job, on_caller)) throw;
      evict(level, known_bases(level));
    }
  }
}

void Scheduler::run(Task& job, bool on_caller) {
  Clock::time_point started = Clock::now();
  std::uint64_t stored = 0;
  std::exception_ptr failure;
  try {
    stored = write(job, started, on_caller);
  } catch (const Error&) {
    failure = std::current_exception();
  }
  settle(job, failure, stored, started, on_caller);
}

void Scheduler::run_group(std::vector<Task>& jobs) {
  Level& level = *jobs.front().route[jobs.front().step];
  const Clock::time_point started = Clock::now();
  std::vector<std::exception_ptr> failures(jobs.size());
  std::vector<std::uint64_t> stored(jobs.size(), 0);
  std::vector<std::unique_ptr<ReadableFile>> sources(jobs.size());
  std::vector<PendingCommit> group;
  std::vector<std::size_t> members;  // index in `jobs` of each entry of `group`
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    Task& job = jobs[i];
    PendingCommit pending{job.version, {}, nullptr};
    try {
      if (job.step > 0) sources[i] = job.route[job.step - 1]->open(job.version);
    } catch (const Error&) {
      failures[i] = std::current_exception();
      continue;
    }
    pending.source = sources[i].get();
    if (job.step == 0) {
      pending.write = [&, i](WritableFile& file) {
        stored[i] = write_extents(file, jobs[i].snapshot.header, jobs[i].snapshot.extents, pipeline_, pool_);
      };
    }
    group.push_back(std::move(pending));
    members.push_back(i);
  }
  {
    TraceSpan span(
        trace_,
        [&] { return "group commit of " + std::to_string(group.size()) + " to L" + std::to_string(level.number()); },
        jobs.front().version);
    const std::vector<std::exception_ptr> committed = level.commit_group(group);
    for (std::size_t k = 0; k < members.size(); ++k) failures[members[k]] = committed[k];
  }
  // A copy is the source's bytes exactly (commit_copy): its size is known
  // without opening it, which an eviction may already have removed once an
  // earlier member of the group is settled.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (sources[i] != nullptr) stored[i] = sources[i]->size();
  }
  for (std::size_t i = 0; i < jobs.size(); ++i) settle(jobs[i], failures[i], stored[i], started, false);
}

void Scheduler::settle(Task& job, const std::exception_ptr& failure, std::uint64_t stored,
                       Clock::time_point started, bool on_caller) {
  Level& level = *job.route[job.step];
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& error) {
      log_.error("version " + std::to_string(job.version) + " not written to L" + std::to_string(level.number()) +
                 ": " + error.what());
      catalog_.failed(job.version, level.number(), error);
    }
  }
  if (job.step == 0) {  // the snapshot was for the first level
    if (job.readable_in_flight) in_flight_.forget(job.version);  // before its buffer space goes
    if (job.snapshot.release) job.snapshot.release();
  }
  if (failure) return;
  const bool evicts_here = on_caller && level.features().is_volatile;
  const bool compacts = !evicts_here && wants_compaction(job.version, level);
  if (evicts_here) {
    evict(level, known_bases(level));
  } else {
    std::lock_guard lock(mutex_);
    if (compacts) compactions_.push_back({job.version, &level});
    request_eviction_locked();  // before the catalog settles the version: drain() must see it
  }
  const double seconds = seconds_since(started);
  log_.debug([&] {
    return "version " + std::to_string(job.version) + " reached L" + std::to_string(level.number()) + " " +
           level.where() + " (" + size_text(stored) + " stored in " + std::to_string(seconds) + " s)";
  });
  catalog_.reached(job.version, level.number(), stored, seconds);
  if (job.step + 1 < job.route.size()) {
    Worker* next = nullptr;
    {
      std::lock_guard lock(mutex_);
      next = &worker_of(job.route[job.step + 1]);
      next->queue.push_back(Task{job.version, job.route, job.step + 1, {}});
    }
    next->has_work.notify_one();
  }
}

void Scheduler::request_eviction_locked() {
  eviction_due_ = true;
  eviction_wanted_.notify_one();
}

void Scheduler::discard(int version) {
  if (nothing_to_remove(version)) return;
  {
    std::lock_guard lock(mutex_);
    discards_.push_back(version);
  }
  eviction_wanted_.notify_one();
}

// True when the eviction thread would remove nothing for this discard, told
// without a system call: every level that may hold versions is a memory
// level (a file removal belongs off the caller's thread) and none holds the
// version (the store took it out of memory already); the version settled
// there first, so no write in flight lands it after this look; and no
// earlier discard is queued, or kept back as a base that this one might
// free. Waking the thread for nothing cost an adjoint run on 2 cores a
// context switch per discard (bench/results/adjoint_small_offcpu.md).
bool Scheduler::nothing_to_remove(int version) {
  for (Level* level : holders_()) {
    if (!level->features().is_volatile || catalog_.outcome(version, level->number()).value_or(-1) == 0 ||
        level->holds(version)) {
      return false;
    }
  }
  std::lock_guard lock(mutex_);
  return discards_.empty() && !kept_discarded_;
}

void Scheduler::request_eviction() {
  std::lock_guard lock(mutex_);
  request_eviction_locked();
}

// One piece of work at a time, so that a compaction never races an eviction
// or a discard on its level: discards first, then compactions (each followed
// by an eviction, which drops the links the compacted version no longer
// needs), then evictions. Neither compactions nor evictions run while a
// capture does. At SCHED_BATCH (base/thread_priority.h): a discard on the
// application's thread wakes it, and must not lose its core to it first.
void Scheduler::evict_loop() {
  make_this_thread_batch();
  Trace::name_this_thread("evict");  // named once its policy is set: it can be found by name
  for (;;) {
    std::optional<int> discard;
    std::optional<CompactionTask> compaction;
    {
      std::unique_lock lock(mutex_);
      eviction_wanted_.wait(lock, [&] {
        return stopping_ || !discards_.empty() || (!capturing_ && (eviction_due_ || !compactions_.empty()));
      });
      if (!discards_.empty()) {
        discard = discards_.front();
      } else if (capturing_) {
        return;  // stopping
      } else if (!compactions_.empty()) {
        compaction = compactions_.front();
      } else if (eviction_due_) {
        eviction_due_ = false;
      } else {
        return;  // stopping
      }
      evicting_ = true;
    }
    if (discard) {
      remove_everywhere(*discard);
    } else if (compaction) {
      compact(*compaction);
    } else {
      evict();
    }
    {
      std::lock_guard lock(mutex_);
      if (discard) discards_.pop_front();
      if (compaction) compactions_.pop_front();
      kept_discarded_ = !discarded_.empty();
      eviction_due_ = eviction_due_ || compaction.has_value();
      evicting_ = false;
    }
    changed_.notify_all();
  }
}

bool Scheduler::wants_compaction(int version, Level& level) {
  return compact_after_ > 0 && compactable(level) && catalog_.base_of(version, level.number()).value_or(-1) >= 0;
}

// Compaction takes CPU and I/O from the application: the thread runs below
// it from its first compaction on (its removals are background work too).
// A failure leaves the chain as it was, and costs restart time, not data:
// it is logged. A discarded version is not worth compacting; the discarded
// versions its chain kept may go once it is.
void Scheduler::compact(const CompactionTask& task) {
  if (discarded_.count(task.version) != 0) return;
  if (!lowered_) lower_this_thread_priority();
  lowered_ = true;
  Level& level = *task.level;
  const std::string where = "version " + std::to_string(task.version) + " on L" + std::to_string(level.number());
  TraceSpan span(trace_, [&] { return "compact L" + std::to_string(level.number()); }, task.version);
  const Clock::time_point started = Clock::now();
  try {
    // Paced while nothing waits for the background work (pipeline/pacer.h).
    Pacer pacer(compact_share_, [this] { return drains_.load() > 0; });
    const Compaction done = compact_version(level, task.version, compact_after_, pacer, known_bases(level), pipeline_);
    if (done.full) catalog_.compacted(task.version, level.number());
    if (done.rewritten) {
      log_.debug([&] {
        return where + " compacted: " + std::to_string(done.deltas) + " deltas merged into a full version (" +
               size_text(done.stored_bytes) + " stored in " + std::to_string(seconds_since(started)) + " s)";
      });
    }
  } catch (const Error& error) {
    log_.warn("compacting " + where + ": " + error.what() + "; its delta chain stays as it was");
  }
  if (!discarded_.empty()) remove_discarded();
}

// A discarded version stays on a level while a version kept there, or on its
// way there, builds on it (it is in that version's delta chain): removing it would break the
// chain. The discard that frees it removes it. Newest first, as eviction,
// so a crash part way leaves no delta without its base. A failure costs
// space, not data: it is logged.
void Scheduler::remove_everywhere(int version) {
  catalog_.wait_finished(version);
  discarded_.insert(version);
  remove_discarded();
}

void Scheduler::remove_discarded() {
  const std::vector<int> newest_first(discarded_.rbegin(), discarded_.rend());
  for (int discarded : newest_first) {
    if (remove_unless_needed(discarded)) discarded_.erase(discarded);
  }
}

// True when no level holds `version` any more.
bool Scheduler::remove_unless_needed(int version) {
  bool held = false;
  for (Level* level : holders_()) {
    try {
      if (!level->holds(version)) continue;
      if (may_be_a_base(version) && needed_on(*level, version, known_bases(*level))) {
        held = true;
      } else {
        level->remove(version);
      }
    } catch (const Error& error) {
      held = true;
      log_.warn("removing discarded version " + std::to_string(version) + " from L" +
                std::to_string(level->number()) + ": " + error.what());
    }
  }
  return !held;
}

// Only a delta has a base, and every version this process writes is newer
// than those the levels held before it (versions increase): while it wrote
// no delta, none of the versions newer than one it wrote builds on it. Then
// a discard removes the version without needed_on's listing of the level
// and walk of the catalog, which an adjoint with a disk level paid at
// nearly every save (issue 27).
bool Scheduler::may_be_a_base(int version) {
  std::lock_guard lock(mutex_);
  return wrote_delta_ || first_version_ < 0 || version < first_version_;
}

// Whether a version on `level`, or on its way there, that is not discarded
// has `base` in its chain. Only newer versions can; the catalog knows the
// bases of this process's versions, the others are read from their headers.
// A delta still on its way counts: a base removed before it lands would
// leave it broken there (a later level copies it after the earlier one
// reported it durable, and a discard may come in between).
bool Scheduler::needed_on(Level& level, int base, const KnownBases& bases) {
  std::vector<int> versions = level.versions();
  const std::vector<int> coming = catalog_.on_their_way_to(level.number());
  versions.insert(versions.end(), coming.begin(), coming.end());
  for (int version : versions) {
    if (version <= base || discarded_.count(version) != 0) continue;
    for (std::optional<int> link = level.base_of(version, bases); link && *link >= base;
         link = level.base_of(*link, bases)) {
      if (*link == base) return true;
    }
  }
  return false;
}

KnownBases Scheduler::known_bases(const Level& level) {
  return [this, number = level.number()](int version) { return catalog_.base_of(version, number); };
}

// A version that a later level still has to copy is pinned. An eviction
// failure costs space, not data: it is logged, and the next eviction retries.
void Scheduler::evict() {
  for (const Step& step : steps_) {
    if (step.every > 0) evict(*step.level, known_bases(*step.level));
  }
}

std::vector<int> Scheduler::evict(Level& level, const KnownBases& bases) {
  try {
    const std::vector<int> evicted =
        level.evict([&](int version) { return catalog_.pinned(version, level.number()); }, bases);
    for (const int version : evicted) {
      log_.debug([&] { return "version " + std::to_string(version) + " evicted from L" + std::to_string(level.number()); });
    }
    return evicted;
  } catch (const Error& error) {
    log_.warn("evicting old versions from L" + std::to_string(level.number()) + ": " + error.what());
    return {};
  }
}

}  // namespace resurgo
