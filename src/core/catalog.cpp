#include "base/clock.h"
#include "core/catalog.h"

#include <algorithm>

namespace resurgo {

namespace {
// Statistics of this many versions are kept; older finished ones are dropped.
constexpr std::size_t kStatsHistory = 4096;

}  // namespace

// Most calls name one of the newest versions (the one being captured, the
// few a level still holds): they are looked for from the newest back, a
// step each, before the whole tree is searched.
Catalog::Entries::iterator Catalog::find_entry(int version) {
  constexpr int kRecentSteps = 8;
  auto at = entries_.end();
  for (int step = 0; step < kRecentSteps && at != entries_.begin(); ++step) {
    --at;
    if (at->first == version) return at;
    if (at->first < version) return entries_.end();  // newer than every one left: not there
  }
  return entries_.find(version);
}

// A new version is the newest one: the end is where it goes (a hint only,
// right for any version).
Catalog::Entry& Catalog::entry(int version) {
  const auto found = find_entry(version);
  if (found != entries_.end()) return found->second;
  return entries_.try_emplace(entries_.end(), version)->second;
}

void Catalog::add(int version, Clock::time_point started, const std::vector<int>& route, const VersionStats& capture) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = entry(version);
    e.stats = capture;
    e.stats.version = version;
    e.started = started;
    e.route = route;
    for (int level : route) e.stats.levels.push_back(LevelStats{level, -1, 0, 0});
    forget_old_entries();
  }
  changed_.notify_all();
}

void Catalog::forget_old_entries() {
  const auto forgettable = [](const Entry& e) { return e.finished() && (!e.failure || e.failure->reported); };
  while (entries_.size() > kStatsHistory && forgettable(entries_.begin()->second)) entries_.erase(entries_.begin());
}

void Catalog::set_blocking(int version, double seconds) {
  std::lock_guard lock(mutex_);
  entry(version).stats.blocking_seconds = seconds;
}

void Catalog::add_backpressure(int version, double seconds) {
  std::lock_guard lock(mutex_);
  entry(version).stats.backpressure_seconds += seconds;
}

void Catalog::set_copy_on_write_bytes(int version, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  entry(version).stats.copy_on_write_bytes = bytes;
}

void Catalog::reached(int version, int level, std::uint64_t stored_bytes, double write_seconds) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = entry(version);
    e.reached.push_back(level);
    ++e.settled_levels;
    for (LevelStats& stats : e.stats.levels) {
      if (stats.level != level) continue;
      stats.seconds_to_level = seconds_since(e.started);
      stats.stored_bytes = stored_bytes;
      stats.write_seconds = write_seconds;
    }
  }
  changed_.notify_all();
  if (listener_) listener_();
}

void Catalog::failed(int version, int level, const Error& error) {
  {
    std::lock_guard lock(mutex_);
    Entry& e = entry(version);
    if (!e.failure) {
      e.failure = Failure{error.code(), "L" + std::to_string(level) + ": " + error.what()};
      ++unreported_failures_;
      ++failures_;
    }
    e.stats.error = e.failure->message;
    e.settled_levels = e.route.size();  // later levels would copy from this one
  }
  changed_.notify_all();
}

std::optional<int> Catalog::base_of(int version, int level) {
  std::lock_guard lock(mutex_);
  const auto found = find_entry(version);
  if (found == entries_.end()) return std::nullopt;
  const std::vector<int>& compacted = found->second.compacted;
  if (std::find(compacted.begin(), compacted.end(), level) != compacted.end()) return -1;
  return found->second.stats.base_version;
}

// A version the catalog has forgotten needs nothing: its bases are read
// from the copies, which say what compaction did.
void Catalog::compacted(int version, int level) {
  std::lock_guard lock(mutex_);
  const auto found = find_entry(version);
  if (found != entries_.end()) found->second.compacted.push_back(level);
}

long Catalog::failure_count() {
  std::lock_guard lock(mutex_);
  return failures_;
}

// A version is in the buffer (L1) once captured, unless its route keeps it
// in the memory level: then it is at L1 once committed there.
bool Catalog::captured_is_enough(const Entry& e, int level) {
  return level <= 1 && std::find(e.route.begin(), e.route.end(), level) == e.route.end();
}

bool Catalog::settled(const Entry& e, int level) const {
  if (captured_is_enough(e, level) || e.finished()) return true;
  return std::find(e.reached.begin(), e.reached.end(), level) != e.reached.end();
}

bool Catalog::pinned(int version, int level) {
  std::lock_guard lock(mutex_);
  const auto it = find_entry(version);
  if (it == entries_.end() || it->second.finished()) return false;
  const Entry& e = it->second;
  const auto at = std::find(e.route.begin(), e.route.end(), level);
  return at != e.route.end() && at + 1 != e.route.end() && e.settled_levels < e.route.size();
}

std::optional<int> Catalog::outcome(int version, int level) {
  std::lock_guard lock(mutex_);
  const auto it = find_entry(version);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (std::find(e.reached.begin(), e.reached.end(), level) != e.reached.end()) return 1;
  return e.finished() ? -1 : 0;
}

bool Catalog::routed(int version, int level) {
  std::lock_guard lock(mutex_);
  const auto it = find_entry(version);
  return it != entries_.end() && std::count(it->second.route.begin(), it->second.route.end(), level) > 0;
}

std::vector<int> Catalog::on_their_way_to(int level) {
  std::lock_guard lock(mutex_);
  std::vector<int> coming;
  for (const auto& [version, e] : entries_) {
    const bool routed = std::find(e.route.begin(), e.route.end(), level) != e.route.end();
    if (routed && !settled(e, level)) coming.push_back(version);
  }
  return coming;
}

bool Catalog::known(int version) {
  std::lock_guard lock(mutex_);
  return find_entry(version) != entries_.end();
}

bool Catalog::all_finished() {
  std::lock_guard lock(mutex_);
  return std::all_of(entries_.begin(), entries_.end(), [](const auto& e) { return e.second.finished(); });
}

void Catalog::throw_failure(int version, Entry& e, const std::string& prefix) {
  if (!e.failure->reported) --unreported_failures_;
  e.failure->reported = true;
  rethrow_as_is(Error(e.failure->code, prefix + "version " + std::to_string(version) + " of store '" + store_ +
                                           "' failed: " + e.failure->message));
}

void Catalog::wait(int version, int level) {
  std::unique_lock lock(mutex_);
  Entry& e = entry(version);
  changed_.wait(lock, [&] { return settled(e, level); });
  const bool reached =
      captured_is_enough(e, level) || std::find(e.reached.begin(), e.reached.end(), level) != e.reached.end();
  if (!reached) throw_failure(version, e, "");
}

void Catalog::wait_all(int level) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      return std::all_of(entries_.begin(), entries_.end(), [&](const auto& e) { return settled(e.second, level); });
    });
  }
  report_failure([] { return std::string("wait: "); });
}

void Catalog::wait_first_level(int version) {
  std::unique_lock lock(mutex_);
  const auto found = find_entry(version);
  if (found == entries_.end()) return;
  const Entry& e = found->second;
  changed_.wait(lock, [&] { return e.settled_levels > 0 || e.finished(); });
}

void Catalog::wait_settled(int version, int level) {
  std::unique_lock lock(mutex_);
  const auto found = find_entry(version);
  if (found == entries_.end()) return;
  const Entry& e = found->second;
  changed_.wait(lock, [&] { return settled(e, level); });
}

void Catalog::wait_finished(int version) {
  std::unique_lock lock(mutex_);
  const auto found = find_entry(version);
  if (found == entries_.end()) return;
  const Entry& e = found->second;
  changed_.wait(lock, [&] { return e.finished(); });
}

void Catalog::on_reached(std::function<void()> listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

void Catalog::wait_all_finished() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] {
    return std::all_of(entries_.begin(), entries_.end(), [](const auto& e) { return e.second.finished(); });
  });
}

void Catalog::report_failure(const std::function<std::string()>& prefix) {
  std::lock_guard lock(mutex_);
  if (unreported_failures_ == 0) return;  // the common case costs one test
  for (auto& [version, e] : entries_) {
    if (e.failure && !e.failure->reported) {
      e.failure->reported = true;
      --unreported_failures_;
      rethrow_as_is(Error(e.failure->code, prefix() + "version " + std::to_string(version) + " of store '" + store_ +
                                               "' failed in the background: " + e.failure->message));
    }
  }
}

void Catalog::discard(int version) {
  std::lock_guard lock(mutex_);
  discarded_.insert(version);
}

bool Catalog::discarded(int version) {
  std::lock_guard lock(mutex_);
  return discarded_.count(version) != 0;
}

std::vector<VersionStats> Catalog::stats() {
  std::lock_guard lock(mutex_);
  std::vector<VersionStats> list;
  for (const auto& [version, e] : entries_) list.push_back(e.stats);
  return list;
}

std::map<int, bool> Catalog::pending() {
  std::lock_guard lock(mutex_);
  std::map<int, bool> list;
  for (const auto& [version, e] : entries_) {
    if (!e.finished()) list[version] = e.reached.empty();
  }
  return list;
}

}  // namespace resurgo
