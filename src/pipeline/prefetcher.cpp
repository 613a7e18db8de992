#include "pipeline/prefetcher.h"

#include <algorithm>

#include "resurgo/errors.hpp"

namespace resurgo {

Prefetcher::Prefetcher(MemoryLevel& memory, std::function<std::vector<Level*>()> sources, const Logger& log,
                       Trace& trace)
    : memory_(memory), sources_(std::move(sources)), log_(log), trace_(trace) {}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::set_order(std::vector<int> versions) {
  {
    std::lock_guard lock(mutex_);
    order_ = std::move(versions);
    look_again_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void Prefetcher::forget(int version) {
  {
    std::lock_guard lock(mutex_);
    forgotten_.insert(version);
    order_.erase(std::remove(order_.begin(), order_.end(), version), order_.end());
    failures_.erase(version);
    prefetched_.erase(version);
  }
  changed_.notify_all();
}

void Prefetcher::restored(int version) {
  {
    std::lock_guard lock(mutex_);
    const auto use = std::find(order_.begin(), order_.end(), version);
    if (use == order_.end()) return;
    order_.erase(use);
    look_again_ = true;
  }
  changed_.notify_all();
}

void Prefetcher::poke() {
  {
    std::lock_guard lock(mutex_);
    look_again_ = true;
  }
  changed_.notify_all();
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

void Prefetcher::run() {
  Trace::name_this_thread("prefetch");
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || look_again_; });
      if (stopping_) return;
      look_again_ = false;
    }
    fetch_due();
  }
}

// In order: a version already in memory, not written yet, or given up is
// passed over; the first one due that does not fit, even after dropping the
// prefetched copies needed after it, waits for room, and so do the ones
// after it (the order is the order of need).
void Prefetcher::fetch_due() {
  std::vector<int> order;
  {
    std::lock_guard lock(mutex_);
    order = order_;
  }
  std::set<int> looked_at;
  for (std::size_t position = 0; position < order.size(); ++position) {
    const int version = order[position];
    if (!looked_at.insert(version).second) continue;  // a later use of a version looked at
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      if (forgotten_.count(version) != 0 || given_up_.count(version) != 0) continue;
    }
    if (memory_.holds(version)) continue;
    Level* source = source_of(version);
    if (source == nullptr) continue;  // not written yet: a commit pokes us
    std::uint64_t bytes = 0;
    try {
      bytes = memory_.footprint(source->open(version)->size());
    } catch (const Error&) {
      continue;  // removed meanwhile
    }
    if (bytes > memory_.capacity()) {
      log_.info("version " + std::to_string(version) + " (" + std::to_string(bytes) +
                " bytes) is larger than the memory level; restart reads it from L" + std::to_string(source->number()));
      std::lock_guard lock(mutex_);
      given_up_.insert(version);
      continue;
    }
    if (!make_room(order, position, bytes) || !fetch(version, *source, bytes)) return;  // memory freed pokes us
  }
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
    TraceSpan span(trace_, "prefetch L" + std::to_string(source.number()) + " to L1", version, bytes);
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
    if (failure) {
      given_up_.insert(version);
      failures_[version] = *failure;
    }
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
