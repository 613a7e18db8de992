#include "auto/location_strategy.h"

#include <algorithm>
#include <cmath>

namespace resurgo::autockpt {

LocationStrategy::LocationStrategy(std::uint64_t timeout_loops) : timeout_loops_(std::max<std::uint64_t>(timeout_loops, 1)) {}

void LocationStrategy::reset() {
  loops_.clear();
  open_.clear();
  history_.clear();
}

std::deque<LocationStrategy::Access>& LocationStrategy::history(const PartAccess& access) {
  const std::size_t index = static_cast<std::size_t>(access.dataset) * 2 + static_cast<std::size_t>(access.part);
  if (index >= history_.size()) history_.resize(index + 1);
  return history_[index];
}

// What a region entered at `start` saves: every part ever written, less
// those whose first access in the window was a write.
void LocationStrategy::finish(const Start& start, const DatasetTable& datasets) {
  double saved = 0;
  for (std::size_t index = 0; index < history_.size(); ++index) {
    const Dataset& dataset = datasets[static_cast<int>(index / 2)];
    const int part = static_cast<int>(index % 2);
    if (part >= dataset.parts() || !dataset.ever_written[part]) continue;
    const std::deque<Access>& accesses = history_[index];
    const auto first = std::lower_bound(accesses.begin(), accesses.end(), start.loop_index,
                                        [](const Access& a, std::uint64_t at) { return a.loop_index < at; });
    if (first == accesses.end() || !first->write_first) saved += static_cast<double>(dataset.part_bytes(part));
  }
  for (std::size_t index = history_.size(); index < datasets.size() * 2; ++index) {
    const Dataset& dataset = datasets[static_cast<int>(index / 2)];
    const int part = static_cast<int>(index % 2);
    if (part < dataset.parts() && dataset.ever_written[part]) saved += static_cast<double>(dataset.part_bytes(part));
  }
  LoopStatistics& loop = *start.loop;
  if (loop.occurrences++ == 0) loop.first_index = start.loop_index;
  loop.last_index = start.loop_index;
  loop.sum += saved;
  loop.sum_of_squares += saved * saved;
  loop.open_start = 0;
}

void LocationStrategy::observe(std::string_view name, std::uint64_t loop_index, std::span<const PartAccess> accesses,
                               const DatasetTable& datasets) {
  auto found = loops_.find(name);
  if (found == loops_.end()) found = loops_.emplace(std::string(name), LoopStatistics{}).first;
  LoopStatistics& loop = found->second;
  // Windows end before this loop: the previous start of the same name (a
  // period), and those that reached the timeout.
  if (loop.open_start != 0) {
    const auto same = std::find_if(open_.begin(), open_.end(), [&](const Start& s) { return s.loop == &loop; });
    finish(*same, datasets);
    open_.erase(same);
  }
  while (!open_.empty() && loop_index - open_.front().loop_index >= timeout_loops_) {
    finish(open_.front(), datasets);
    open_.pop_front();
  }
  open_.push_back({loop_index, &loop});
  loop.open_start = loop_index;
  const std::uint64_t oldest = open_.front().loop_index;
  for (std::deque<Access>& accesses_of_part : history_) {
    while (!accesses_of_part.empty() && accesses_of_part.front().loop_index < oldest) accesses_of_part.pop_front();
  }
  for (const PartAccess& access : accesses) history(access).push_back({loop_index, access.written && !access.read});
}

std::vector<LocationCandidate> LocationStrategy::ranking() const {
  std::vector<LocationCandidate> list;
  for (const auto& [name, loop] : loops_) {
    if (loop.occurrences < 2) continue;
    const double n = static_cast<double>(loop.occurrences);
    const double spacing = static_cast<double>(loop.last_index - loop.first_index) / (n - 1);
    if (spacing > static_cast<double>(timeout_loops_)) continue;
    const double mean = loop.sum / n;
    const double variance = std::max(0.0, loop.sum_of_squares / n - mean * mean);
    list.push_back({name, loop.occurrences, mean, std::sqrt(variance), spacing});
  }
  std::sort(list.begin(), list.end(), [](const LocationCandidate& a, const LocationCandidate& b) {
    if (a.mean_bytes != b.mean_bytes) return a.mean_bytes < b.mean_bytes;
    if (a.spread_bytes != b.spread_bytes) return a.spread_bytes < b.spread_bytes;
    if (a.occurrences != b.occurrences) return a.occurrences > b.occurrences;
    return a.loop < b.loop;
  });
  return list;
}

std::optional<double> LocationStrategy::mean_bytes(std::string_view name) const {
  const auto found = loops_.find(name);
  if (found == loops_.end() || found->second.occurrences == 0) return std::nullopt;
  return found->second.sum / static_cast<double>(found->second.occurrences);
}

std::vector<std::string> LocationStrategy::loops() const {
  std::vector<std::string> names;
  for (const auto& [name, loop] : loops_) names.push_back(name);
  return names;
}

std::uint64_t LocationStrategy::bookkeeping_bytes() const {
  std::uint64_t bytes = open_.size() * sizeof(Start);
  for (const std::deque<Access>& accesses : history_) bytes += accesses.size() * sizeof(Access);
  for (const auto& [name, loop] : loops_) bytes += name.size() + sizeof loop + 32;
  return bytes;
}

}  // namespace resurgo::autockpt
