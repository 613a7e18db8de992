#include "pipeline/prefetcher.h"

#include <algorithm>

#include "base/thread_priority.h"
#include "resurgo/errors.hpp"

namespace resurgo {

Prefetcher::Prefetcher(MemoryLevel& memory, std::function<std::vector<Level*>()> sources, const Logger& log,
                       Trace& trace, std::unique_ptr<DeviceStage> device)
    : memory_(memory), sources_(std::move(sources)), log_(log), trace_(trace), device_(std::move(device)) {}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::set_order(std::vector<int> versions) {
  if (device_) device_->take_regions();
  {
    std::lock_guard lock(mutex_);
    order_ = std::move(versions);
    device_done_.clear();
    look_again_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void Prefetcher::forget(int version) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    forgotten_.insert(version);
    look_again_ = true;  // its room in L0 is free
    order_.erase(std::remove(order_.begin(), order_.end(), version), order_.end());
    failures_.erase(version);
    prefetched_.erase(version);
    wake = needs_a_pass();
  }
  if (device_) device_->discarded(version);  // one being staged is dropped when it lands
  if (wake) changed_.notify_all();
}

void Prefetcher::restored(int version) {
  bool needed_again = false;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    const auto use = std::find(order_.begin(), order_.end(), version);
    if (use == order_.end()) return;
    order_.erase(use);
    needed_again = std::find(order_.begin(), order_.end(), version) != order_.end();
    wake = needs_a_pass();
  }
  if (device_ && !needed_again) device_->restored(version);
  if (wake) changed_.notify_all();
}

// Every commit and every eviction from memory pokes.
void Prefetcher::poke() {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    wake = needs_a_pass();
  }
  if (wake) changed_.notify_all();
}

// A commit, a restore or a discard changes nothing for a pass that found
// everything due in memory (or in L0): only a pass that is running or that
// left a version waiting (for its write, for room, beyond the window) needs
// another. A wake-up for nothing would cost each checkpoint or restore of
// an adjoint run a context switch, and on a busy machine the woken thread
// takes the caller's CPU first.
bool Prefetcher::needs_a_pass() {
  if (!passing_ && !waits_for_poke_) return false;
  look_again_ = true;
  return true;
}

std::optional<std::string> Prefetcher::settle(int version) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return in_flight_ != version; });
  const auto failure = failures_.find(version);
  if (failure == failures_.end()) return std::nullopt;
  std::string message = std::move(failure->second);
  failures_.erase(failure);
  return message;
}

std::uint64_t Prefetcher::passes() {
  std::lock_guard lock(mutex_);
  return passes_;
}

std::unique_ptr<RestartTargets> Prefetcher::restart_targets(const Registry& registry, int version) {
  return device_ ? device_->restart_targets(registry, version) : nullptr;
}

// At SCHED_BATCH (base/thread_priority.h): a discard, commit or restore
// that wakes it must not lose its core to it before returning, as the
// saves of a small adjoint run with a disk level did at their discards.
void Prefetcher::run() {
  make_this_thread_batch();
  Trace::name_this_thread("prefetch");  // named once its policy is set: it can be found by name
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || look_again_; });
      if (stopping_) return;
      look_again_ = false;
      passing_ = true;
    }
    const bool waits = fetch_due();
    std::lock_guard lock(mutex_);
    passing_ = false;
    waits_for_poke_ = waits;
    ++passes_;
  }
}

// In order: a version not written yet is passed over, one already in
// memory or given up goes straight to L0; the first one due that does not
// fit, even after dropping the prefetched copies needed after it (or that
// L0 has no room for), waits for room, and so do the ones after it (the
// order is the order of need). The pass looks no further ahead than the
// memory level holds versions of the size last looked up, those not written
// yet included: a version beyond would be dropped again for those before
// it once they are written, and asking each level for each version of a
// long order (a file lookup per version on a directory level) at every
// commit and restore would cost an adjoint run of small states a lookup
// per version per pass (issue 27). A restore moves that window on.
bool Prefetcher::fetch_due() {
  std::vector<int> order;
  {
    std::lock_guard lock(mutex_);
    order = order_;
  }
  std::set<int> looked_at;
  bool unwritten = false;
  std::uint64_t ahead = 0;  // the memory the versions looked at take
  for (std::size_t position = 0; position < order.size(); ++position) {
    const int version = order[position];
    if (!looked_at.insert(version).second) continue;  // a later use of a version looked at
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      if (forgotten_.count(version) != 0) continue;
    }
    // Beyond the window (the first version is always in it): a restore or a commit pokes us.
    if (ahead > 0 && ahead + version_bytes_ > memory_.capacity()) return true;
    ahead += version_bytes_;
    if (!memory_.holds(version)) {
      Level* source = source_of(version);
      if (source == nullptr) {
        unwritten = true;  // a commit pokes us
        continue;
      }
      if (!into_memory(order, position, version, *source)) return true;  // memory freed pokes us
    }
    if (device_ && !onto_device(version)) return true;  // a restore or a discard pokes us
  }
  return unwritten;
}

bool Prefetcher::into_memory(const std::vector<int>& order, std::size_t position, int version, Level& source) {
  {
    std::lock_guard lock(mutex_);
    if (given_up_.count(version) != 0) return true;
  }
  std::uint64_t bytes = 0;
  try {
    bytes = memory_.footprint(source.open(version)->size());
  } catch (const Error&) {
    return true;  // removed meanwhile
  }
  if (bytes > memory_.capacity()) {
    log_.info("version " + std::to_string(version) + " (" + std::to_string(bytes) +
              " bytes) is larger than the memory level; restart reads it from L" + std::to_string(source.number()));
    std::lock_guard lock(mutex_);
    given_up_.insert(version);
    return true;
  }
  version_bytes_ = bytes;
  return make_room(order, position, bytes) && fetch(version, source, bytes);
}

// Like fetch(): a restart of the version waits for it (settle), and a
// version discarded meanwhile is dropped from L0 once it landed.
bool Prefetcher::onto_device(int version) {
  {
    std::lock_guard lock(mutex_);
    // A failure recorded waits for the restart that reports it.
    if (device_done_.count(version) != 0 || failures_.count(version) != 0) return true;
    in_flight_ = version;
  }
  DeviceStage::Outcome outcome = DeviceStage::Outcome::kDone;
  std::optional<std::string> failure;
  try {
    TraceSpan span(trace_, "prefetch to L0", version, 0);
    outcome = device_->stage(version);
  } catch (const Error& error) {
    failure = std::string("prefetch into the L0 device cache failed: ") + error.what();
  }
  bool dropped = false;
  {
    std::lock_guard lock(mutex_);
    in_flight_ = -1;
    dropped = forgotten_.count(version) != 0;
    if (outcome == DeviceStage::Outcome::kDone) device_done_.insert(version);
    if (failure) failed(version, *failure);
  }
  changed_.notify_all();
  if (failure) log_.warn("version " + std::to_string(version) + ": " + *failure);
  if (dropped) device_->discarded(version);
  return outcome == DeviceStage::Outcome::kDone;
}

void Prefetcher::failed(int version, const std::string& why) {
  given_up_.insert(version);
  failures_[version] = why;
}

Level* Prefetcher::source_of(int version) {
  for (Level* level : sources_()) {
    if (level->holds(version)) return level;
  }
  return nullptr;
}

// The future is known, so the replacement is Belady's: while `bytes` do not
// fit, the prefetched copy needed last (or never again) goes, if it is
// needed after the version at `position`. Its level still holds it.
bool Prefetcher::make_room(const std::vector<int>& order, std::size_t position, std::uint64_t bytes) {
  while (memory_.free_bytes() < bytes) {
    const std::optional<int> victim = needed_last(order, position);
    if (!victim) return false;
    {
      std::lock_guard lock(mutex_);
      prefetched_.erase(*victim);
    }
    memory_.remove(*victim);
  }
  return true;
}

std::optional<int> Prefetcher::needed_last(const std::vector<int>& order, std::size_t position) {
  std::set<int> candidates;
  {
    std::lock_guard lock(mutex_);
    candidates = prefetched_;
  }
  std::optional<int> victim;
  std::size_t victim_use = position;
  for (int version : candidates) {
    if (!memory_.holds(version)) continue;
    const auto next_use = static_cast<std::size_t>(std::find(order.begin(), order.end(), version) - order.begin());
    if (next_use > victim_use) {
      victim = version;
      victim_use = next_use;
    }
  }
  return victim;
}

bool Prefetcher::fetch(int version, Level& source, std::uint64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    if (forgotten_.count(version) != 0) return true;
    in_flight_ = version;
  }
  std::optional<std::string> failure;
  bool fitted = true;
  try {
    TraceSpan span(trace_, [&] { return "prefetch L" + std::to_string(source.number()) + " to L1"; }, version, bytes);
    memory_.commit_copy(version, *source.open(version));
  } catch (const Error& error) {
    fitted = memory_.free_bytes() >= bytes;  // else memory was taken meanwhile: retry when freed
    if (fitted) failure = "prefetch from L" + std::to_string(source.number()) + " failed: " + error.what();
  }
  bool dropped = false;
  {
    std::lock_guard lock(mutex_);
    in_flight_ = -1;
    dropped = forgotten_.count(version) != 0;
    // Discarded while it was copied: what the copy found no longer matters
    // (a scratch level may already have written another version into the
    // file, DirectoryLevel::set_scratch).
    if (dropped) failure.reset();
    if (failure) failed(version, *failure);
  }
  changed_.notify_all();
  if (failure) log_.warn("version " + std::to_string(version) + ": " + *failure);
  if (!failure && fitted && !dropped) {
    std::lock_guard lock(mutex_);
    prefetched_.insert(version);
  }
  if (dropped) memory_.remove(version);  // discarded while it was copied
  return fitted;
}

}  // namespace resurgo
