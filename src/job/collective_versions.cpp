#include "job/collective_versions.h"

#include <algorithm>
#include <limits>

#include "format/file_names.h"
#include "format/container.h"
#include "base/newest_everywhere.h"
#include "base/thread_priority.h"
#include "job/job_text.h"
#include "job/shared_version.h"

namespace resurgo {

CollectiveVersions::CollectiveVersions(Comm& comm, int node, std::string store, std::string store_id, Hooks hooks,
                                       const Logger& log, double timeout_seconds)
    : comm_(comm),
      store_(std::move(store)),
      store_id_(std::move(store_id)),
      hooks_(std::move(hooks)),
      log_(log),
      timeout_seconds_(timeout_seconds) {
  for (long each : alone() ? std::vector<long>{node} : comm_.allgather(node, timeout_seconds_)) {
    nodes_.push_back(static_cast<int>(each));
  }
  // Every rank must choose alike: the job thread's communicator is made collectively.
  const bool threads = alone() ? comm_.threads_may_call() : comm_.allreduce_min(comm_.threads_may_call() ? 1 : 0) == 1;
  if (!threads) {
    log_.info("the communicator may not be called from another thread: the job's steps for each version run in "
              "the next store call");
    return;
  }
  job_comm_ = comm_.duplicate();
  thread_ = std::thread([this] { job_loop(); });
}

CollectiveVersions::~CollectiveVersions() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveVersions::add(int version, std::chrono::steady_clock::time_point started,
                             std::vector<DirectoryLevel*> levels, std::vector<format::ManifestRegion> layout) {
  std::sort(levels.begin(), levels.end(), [](DirectoryLevel* a, DirectoryLevel* b) { return a->number() < b->number(); });
  // Before the pipeline has the version: its L4 commit waits for its slot.
  if (DirectoryLevel* persistent = shared_slot_level(levels)) {
    persistent->shared_slots().expect(version, timeout_seconds_);
  }
  hand_over(Version{version, started, std::move(levels), std::move(layout)});
}

void CollectiveVersions::add_failed(int version) {
  hand_over(Version{version, std::chrono::steady_clock::now(), {}, {}, true});
}

void CollectiveVersions::hand_over(Version added) {
  {
    std::lock_guard lock(mutex_);
    added_.push_back(std::move(added));
  }
  if (on_job_thread()) {
    changed_.notify_all();
    return;
  }
  // Inline: the steps of the versions before this one; its own copy is
  // still being written.
  while (added_.size() > 1) {
    const Version earlier = std::move(added_.front());
    added_.pop_front();
    run_steps(earlier, comm_);
  }
}

void CollectiveVersions::drain(bool persistent) {
  if (!on_job_thread()) {
    while (!added_.empty()) {
      const Version earlier = std::move(added_.front());
      added_.pop_front();
      run_steps(earlier, comm_);
    }
    if (persistent) decide_persistent(comm_, true);
    return;
  }
  std::unique_lock lock(mutex_);
  draining_ = persistent;
  changed_.notify_all();
  changed_.wait(lock, [&] { return added_.empty() && !busy_ && !draining_; });
}

// The same steps in the same order on every rank: the versions in the order
// added; a drain only after every version added before it.
void CollectiveVersions::job_loop() {
  // The job's steps wait for the other ranks and write small files: the
  // application's threads come first.
  lower_this_thread_priority();
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !added_.empty() || draining_; });
    if (stopping_) return;
    busy_ = true;
    const bool persistent_step = added_.empty();
    if (persistent_step) {
      lock.unlock();
      guarded(-1, [&] { decide_persistent(*job_comm_, true); });
    } else {
      const Version next = std::move(added_.front());
      added_.pop_front();
      lock.unlock();
      guarded(next.version, [&] { run_steps(next, *job_comm_); });
    }
    lock.lock();
    busy_ = false;
    if (persistent_step) draining_ = false;
    changed_.notify_all();
  }
}

// A step that fails part way may have left the ranks' collectives unmatched:
// the job takes no further step.
void CollectiveVersions::guarded(int version, const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception& error) {
    out_of_step_ = true;
    record_failure(version, ErrorCode::kState,
                   "the job's steps for version " + std::to_string(version) + " failed, and the ranks may be out of "
                   "step; close the store: " + error.what());
  }
}

// Slots are reserved by the job thread, which answers a commit waiting
// for its slot whatever the application does next; steps run inside the
// store's calls (inline) would leave it waiting until the next call.
DirectoryLevel* CollectiveVersions::shared_slot_level(const std::vector<DirectoryLevel*>& levels) const {
  if (!shared_files_ || !on_job_thread()) return nullptr;
  const auto found = std::find_if(levels.begin(), levels.end(),
                                  [](DirectoryLevel* level) { return !level->features().node_local; });
  return found == levels.end() ? nullptr : *found;
}

void CollectiveVersions::run_steps(const Version& added, Comm& job) {
  const bool agreed = agree_on_version(added, job);
  if (DirectoryLevel* persistent = shared_slot_level(added.levels)) {
    std::uint64_t region_bytes = 0;
    for (const format::ManifestRegion& region : added.layout) region_bytes += region.bytes;
    reserve_shared_slots(added.version, agreed, region_bytes, *persistent, job, log_, timeout_seconds_);
  }
  if (!agreed) return;
  if (added.levels.empty() && hooks_.in_memory) hooks_.in_memory(added.version, job);
  for (DirectoryLevel* level : added.levels) {
    if (level->features().node_local) {
      decide(added, *level, job, true);
    } else {
      persistent_.push_back(added);
    }
  }
  decide_persistent(job, false);
}

// Each rank offers 2 * version + 1 when its checkpoint failed before the
// capture, 2 * version otherwise.
bool CollectiveVersions::agree_on_version(const Version& added, Comm& job) {
  const int version = added.version;
  if (alone()) return !added.failed_here;
  if (out_of_step_) {
    record_failure(version, ErrorCode::kState,
                   "version " + std::to_string(version) + " is not a version of the job: the ranks are out of step "
                   "since a rank did not come (an earlier error named it); close the store");
    return false;
  }
  std::vector<long> offers;
  try {
    offers = job.allgather(2L * version + (added.failed_here ? 1 : 0), timeout_seconds_);
  } catch (const StateError& error) {
    out_of_step_ = true;
    record_failure(version, ErrorCode::kState, "version " + std::to_string(version) + ": " + error.what());
    return false;
  }
  std::string listing;
  std::string failed_ranks;
  bool same = true;
  for (std::size_t rank = 0; rank < offers.size(); ++rank) {
    same = same && offers[rank] / 2 == version;
    if (offers[rank] % 2 != 0) failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(rank);
    listing += (listing.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + ": " +
               std::to_string(offers[rank] / 2);
  }
  if (same && failed_ranks.empty()) return true;
  if (same) {
    if (added.failed_here) return false;  // this rank threw already
    record_failure(version, ErrorCode::kState,
                   "checkpoint " + std::to_string(version) + " failed on rank(s) " + failed_ranks + " (their errors "
                   "say why), so it is not a version of the job");
    return false;
  }
  record_failure(version, ErrorCode::kInvalidArgument,
                 "the ranks checkpointed different versions (" + listing + "); every rank must checkpoint the "
                 "same version, and none of these is a version of the job");
  return false;
}

void CollectiveVersions::decide_persistent(Comm& job, bool block) {
  while (!persistent_.empty()) {
    const Version& head = persistent_.front();
    const auto level = std::find_if(head.levels.begin(), head.levels.end(),
                                    [](DirectoryLevel* candidate) { return !candidate->features().node_local; });
    long state = 0;
    if (block) hooks_.settle(head.version, (*level)->number());
    state = hooks_.outcome(head.version, (*level)->number());
    if (!alone()) state = job.allreduce_min(state);  // the same on every rank: so is the loop
    if (state == 0) return;
    if (state > 0 && shared_files_) {
      state = write_shared_version(head.version, **level, job, log_, timeout_seconds_) ? 1 : -1;
    }
    if (state > 0 && !commit_manifest(head, **level, job)) state = -1;
    if (state > 0) {
      if (shared_files_) drop_rank_file(head.version, **level, job);
    } else {
      if (shared_files_) abandon_shared_slot(head.version, **level, job.rank());
      std::lock_guard lock(mutex_);
      failed_.insert({head.version, (*level)->number()});
      unreported_failure_levels_.insert((*level)->number());
    }
    persistent_.pop_front();
  }
}

// Once the manifest names the version, the shared file holds this rank's
// part: its own file goes (the barrier: rank 0 has written the manifest).
void CollectiveVersions::drop_rank_file(int version, DirectoryLevel& level, Comm& job) {
  if (!alone()) job.barrier();
  try {
    if (level.read_manifest(version)) level.remove_rank_file(version);
  } catch (const Error& error) {
    log_.warn("version " + std::to_string(version) + ": this rank's own file in " + level.where() +
              " stays beside the shared file (restart reads either): " + error.what());
  }
}

void CollectiveVersions::decide(const Version& added, DirectoryLevel& level, Comm& job, bool block) {
  if (block) hooks_.settle(added.version, level.number());
  long state = hooks_.outcome(added.version, level.number());
  if (!alone()) state = job.allreduce_min(state);
  if (state > 0 && commit_manifest(added, level, job)) {
    if (hooks_.complete_at_local) hooks_.complete_at_local(added.version, added.started, job);
    return;
  }
  std::lock_guard lock(mutex_);
  failed_.insert({added.version, level.number()});
  unreported_failure_levels_.insert(level.number());
  log_.warn("version " + std::to_string(added.version) + " is not a version of the job at L" +
            std::to_string(level.number()) + ": writing it failed on some rank (that rank reports why)");
}

// Rank 0 joins every rank's part (its file and regions) into the manifest
// and sends it to the ranks that write it: itself for a shared level, the
// lowest rank of each node for a node-local one. A rank that cannot read its
// own file back sends an empty part: then no manifest is written.
bool CollectiveVersions::commit_manifest(const Version& added, DirectoryLevel& level, Comm& job) {
  std::string mine;
  try {
    const std::unique_ptr<ReadableFile> file = level.open(added.version);
    const format::Container container = format::read_container(*file);
    mine = format::encode_manifest_part({comm_.rank(), node_of(comm_.rank()),
                                         format::container_file_name(added.version, comm_.rank()), container.file_size,
                                         container.checksum},
                                        added.layout);
  } catch (const Error& error) {
    log_.error("version " + std::to_string(added.version) + " at L" + std::to_string(level.number()) +
               ": this rank cannot read its committed file back, so the job writes no manifest: " + error.what());
  }
  std::vector<int> writers{0};
  for (int rank = 1; level.features().node_local && rank < comm_.size(); ++rank) {
    const auto lower_ranks_end = nodes_.begin() + rank;
    if (std::find(nodes_.begin(), lower_ranks_end, node_of(rank)) == lower_ranks_end) writers.push_back(rank);
  }
  const bool writer = std::count(writers.begin(), writers.end(), comm_.rank()) > 0;
  std::string text;
  if (comm_.rank() == 0) {
    format::Manifest manifest{store_, store_id_, added.version, comm_.size(), {}, {}};
    bool complete = !mine.empty();
    if (complete) format::decode_manifest_part(mine, manifest);
    for (int rank = 1; rank < comm_.size(); ++rank) {
      const std::string part = receive_text(job, rank, "a manifest part");
      complete = complete && !part.empty();
      if (complete) format::decode_manifest_part(part, manifest);
    }
    if (complete) text = format::encode_manifest(manifest);
    for (std::size_t index = 1; index < writers.size(); ++index) send_text(job, writers[index], text);
  } else {
    send_text(job, 0, mine);
    if (writer) text = receive_text(job, 0, "a job manifest");
  }
  bool written = !writer || !text.empty();
  if (writer && written) {
    try {
      level.commit_manifest(added.version, text);
    } catch (const Error& error) {
      written = false;
      log_.error("job manifest of version " + std::to_string(added.version) + " not written to " + level.where() +
                 " (the version is not complete there): " + error.what());
    }
  }
  return alone() ? written : job.allreduce_min(written ? 1 : 0) == 1;
}

void CollectiveVersions::record_failure(int version, ErrorCode code, const std::string& message) {
  std::lock_guard lock(mutex_);
  failures_.emplace_back(code, message);
  for (int level : {2, 4}) {
    failed_.insert({version, level});
    unreported_failure_levels_.insert(level);
  }
  log_.error(message);
}

void CollectiveVersions::report_failure(const std::string& prefix) {
  std::unique_lock lock(mutex_);
  if (failures_.empty()) return;
  const auto [code, message] = failures_.front();
  failures_.pop_front();
  lock.unlock();
  rethrow_as_is(Error(code, prefix + message));
}

bool CollectiveVersions::failed(int version, int level) {
  std::lock_guard lock(mutex_);
  return failed_.count({version, level}) > 0;
}

bool CollectiveVersions::take_failures(int level) {
  std::lock_guard lock(mutex_);
  return unreported_failure_levels_.erase(level) > 0;
}

int CollectiveVersions::agree_newest(std::vector<int> candidates) {
  if (alone()) return candidates.empty() ? -1 : *std::max_element(candidates.begin(), candidates.end());
  return static_cast<int>(
      newest_everywhere(comm_, {candidates.begin(), candidates.end()}, std::numeric_limits<long>::max()));
}

}  // namespace resurgo
