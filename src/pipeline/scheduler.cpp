#include "pipeline/scheduler.h"

#include <algorithm>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/thread_priority.h"
#include "base/units.h"
#include "format/version_writer.h"
#include "pipeline/compactor.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {


// Versions that may wait for their copy to the next level (the one being
// copied included) before the level that feeds it waits too. When L4 is
// slower than L2, versions bound for L4 would otherwise pile up on the
// node-local disk, pinned until copied (the stress campaign saw thousands):
// with the bound, L2 keeps L4's pace, and once the buffer is full the
// application sees the wait as backpressure.
constexpr std::size_t kMaxBacklog = 2;


}  // namespace

Scheduler::Scheduler(std::vector<Step> steps, const Config::Pipeline& pipeline, ThreadPool& pool, Catalog& catalog,
                     const Logger& log, Trace& trace, const Config::Delta& delta)
    : steps_(std::move(steps)),
      pipeline_(pipeline),
      compact_after_(delta.compact_after),
      compaction_max_bytes_(quarter_of_physical_memory()),
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
  Worker* worker = nullptr;
  bool on_caller = false;
  {
    std::lock_guard lock(mutex_);
    worker = &worker_of(task.route.front());
    on_caller = writes_on_caller(task.snapshot) && !worker->busy && worker->queue.empty();
    if (on_caller) {
      worker->busy = true;  // the caller stands in for the worker, in its order
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
        worker.busy = false;
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

void Scheduler::set_capturing(bool capturing) {
  {
    std::lock_guard lock(mutex_);
    capturing_ = capturing;
  }
  if (!capturing) eviction_wanted_.notify_one();
}

void Scheduler::drain() {
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
    if (worker->level == level) return worker->queue.size() + (worker->busy ? 1 : 0);
  }
  return 0;
}

void Scheduler::wait_for_backlog(const Task& job) {
  if (job.step + 1 >= job.route.size()) return;
  const Level* next = job.route[job.step + 1];
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return backlog(next) < kMaxBacklog; });
}

void Scheduler::work(Worker& worker) {
  // A level that only copies versions another level already holds (L4
  // behind an L2 that takes every checkpoint) is the least urgent work: the
  // version is safe at the level before meanwhile, and the backlog bound
  // keeps the copies from falling behind for good.
  if (worker.copies_only) lower_this_thread_priority();
  Trace::name_this_thread("level L" + std::to_string(worker.level->number()));
  for (;;) {
    Task job;
    {
      std::unique_lock lock(mutex_);
      worker.has_work.wait(lock, [&] { return stopping_ || !worker.queue.empty(); });
      if (worker.queue.empty()) return;
      job = std::move(worker.queue.front());
      worker.queue.pop_front();
      worker.busy = true;
    }
    changed_.notify_all();
    run(job);
    {
      std::lock_guard lock(mutex_);
      worker.busy = false;
    }
    changed_.notify_all();
  }
}

// The first level writes the snapshot (or waits for the process that does);
// the others copy from the level before. A failure ends the version's route.
std::uint64_t Scheduler::write(Task& job, Clock::time_point& started) {
  Level& level = *job.route[job.step];
  if (job.step > 0) {
    Level& source = *job.route[job.step - 1];
    TraceSpan span(trace_, "copy L" + std::to_string(source.number()) + " to L" + std::to_string(level.number()),
                   job.version);
    level.commit_copy(job.version, *source.open(job.version));
    return level.open(job.version)->size();
  }
  wait_for_backlog(job);
  started = Clock::now();
  TraceSpan span(trace_, "write L" + std::to_string(level.number()), job.version);
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
  try {
    level.commit(job.version, write_snapshot);
  } catch (const LevelFullError&) {
    // The eviction thread waits while captures run: under checkpoints back
    // to back it can fall behind the level's keep, and a bounded level fills
    // with versions it should no longer hold. Evicting them here first is
    // what keep promises. The commit is tried again even when this evicted
    // nothing, since the eviction thread may have freed the level since the
    // commit failed; only a level full of versions it must keep fails again.
    evict(level, known_bases(level));
    level.commit(job.version, write_snapshot);
  }
  return stored;
}

void Scheduler::run(Task& job, bool on_caller) {
  Level& level = *job.route[job.step];
  Clock::time_point started = Clock::now();
  bool written = false;
  std::uint64_t stored = 0;
  try {
    stored = write(job, started);
    written = true;
  } catch (const Error& error) {
    log_.error("version " + std::to_string(job.version) + " not written to L" + std::to_string(level.number()) +
               ": " + error.what());
    catalog_.failed(job.version, level.number(), error);
  }
  if (job.step == 0 && job.snapshot.release) job.snapshot.release();
  if (!written) return;
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
  {
    std::lock_guard lock(mutex_);
    discards_.push_back(version);
  }
  eviction_wanted_.notify_one();
}

void Scheduler::request_eviction() {
  std::lock_guard lock(mutex_);
  request_eviction_locked();
}

// One piece of work at a time, so that a compaction never races an eviction
// or a discard on its level: discards first, then compactions (each followed
// by an eviction, which drops the links the compacted version no longer
// needs), then evictions. Neither compactions nor evictions run while a
// capture does.
void Scheduler::evict_loop() {
  Trace::name_this_thread("evict");
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
  TraceSpan span(trace_, "compact L" + std::to_string(level.number()), task.version);
  const Clock::time_point started = Clock::now();
  try {
    const Compaction done = compact_version(level, task.version, compact_after_, compaction_max_bytes_,
                                            known_bases(level), pipeline_, pool_);
    if (done.full) catalog_.compacted(task.version, level.number());
    if (done.rewritten) {
      log_.debug([&] {
        return where + " compacted: " + std::to_string(done.deltas) + " deltas merged into a full version (" +
               size_text(done.stored_bytes) + " stored in " + std::to_string(seconds_since(started)) + " s)";
      });
    } else if (done.too_large) {
      log_.debug([&] {
        return where + " not compacted: its state exceeds the " + size_text(compaction_max_bytes_) +
               " a compaction may hold in memory (a quarter of physical memory)";
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
  for (const Step& step : steps_) {
    try {
      if (!step.level->holds(version)) continue;
      if (needed_on(*step.level, version, known_bases(*step.level))) {
        held = true;
      } else {
        step.level->remove(version);
      }
    } catch (const Error& error) {
      held = true;
      log_.warn("removing discarded version " + std::to_string(version) + " from L" +
                std::to_string(step.level->number()) + ": " + error.what());
    }
  }
  return !held;
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
