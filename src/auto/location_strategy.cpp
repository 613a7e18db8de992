#include "auto/location_strategy.h"

#include <algorithm>
#include <cmath>

namespace resurgo::autockpt {

LocationStrategy::LocationStrategy(std::uint64_t window_loops)
    : window_loops_(std::max<std::uint64_t>(window_loops, 1)), window_(window_loops_ + 1) {}

void LocationStrategy::reset() {
  std::fill(window_.begin(), window_.end(), Start{});
  loops_.clear();
  std::fill(last_access_.begin(), last_access_.end(), 0);
  first_index_ = 0;
  dropped_ = 0;
}

std::uint64_t& LocationStrategy::last_access(const PartAccess& access) {
  const std::size_t index = static_cast<std::size_t>(access.dataset) * 2 + static_cast<std::size_t>(access.part);
  if (index >= last_access_.size()) last_access_.resize(index + 1, 0);
  return last_access_[index];
}

// The start `loop_index` has seen its whole window: what it would save is
// what was ever written, less what its window overwrote first.
void LocationStrategy::finish_start(std::uint64_t loop_index, const DatasetTable& datasets) {
  Start& start = slot(loop_index);
  dropped_ += start.difference;
  if (start.loop != nullptr) {
    const double saved = static_cast<double>(datasets.ever_written_bytes()) - static_cast<double>(dropped_);
    LoopStatistics& loop = *start.loop;
    if (loop.occurrences++ == 0) loop.first_index = loop_index;
    loop.last_index = loop_index;
    loop.sum += saved;
    loop.sum_of_squares += saved * saved;
  }
  start = Start{};
}

void LocationStrategy::observe(std::string_view loop, std::uint64_t loop_index, std::span<const PartAccess> accesses,
                               const DatasetTable& datasets) {
  if (first_index_ == 0) first_index_ = loop_index;
  if (loop_index >= first_index_ + window_loops_) finish_start(loop_index - window_loops_, datasets);
  auto found = loops_.find(loop);
  if (found == loops_.end()) found = loops_.emplace(std::string(loop), LoopStatistics{}).first;
  slot(loop_index).loop = &found->second;
  const std::uint64_t oldest_open = loop_index + 1 > window_loops_ ? loop_index + 1 - window_loops_ : 1;
  for (const PartAccess& access : accesses) {
    std::uint64_t& previous = last_access(access);
    if (access.written && !access.read) {
      const std::uint64_t from = std::max({previous + 1, oldest_open, first_index_});
      const auto bytes = static_cast<std::int64_t>(datasets[access.dataset].part_bytes(access.part));
      slot(from).difference += bytes;
      slot(loop_index + 1).difference -= bytes;
    }
    previous = loop_index;
  }
}

std::vector<LocationCandidate> LocationStrategy::ranking() const {
  std::vector<LocationCandidate> list;
  for (const auto& [name, loop] : loops_) {
    if (loop.occurrences < 2) continue;
    const double n = static_cast<double>(loop.occurrences);
    const double spacing = static_cast<double>(loop.last_index - loop.first_index) / (n - 1);
    if (spacing > static_cast<double>(window_loops_)) continue;
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

std::uint64_t LocationStrategy::bookkeeping_bytes() const {
  std::uint64_t bytes = window_.size() * sizeof(Start) + last_access_.size() * sizeof(std::uint64_t);
  for (const auto& [name, loop] : loops_) bytes += name.size() + sizeof loop + 32;
  return bytes;
}

}  // namespace resurgo::autockpt
