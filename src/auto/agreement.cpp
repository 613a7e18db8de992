#include "auto/agreement.h"

#include <algorithm>
#include <climits>
#include <string_view>

#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

constexpr long kNoProposal = LONG_MAX;      // ranks other than 0
constexpr long kNoLocation = LONG_MAX - 1;  // rank 0 has no candidate

// A loop name as a non-negative long below kNoLocation, the same on every rank.
long name_key(std::string_view name) {
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<long>(hash % static_cast<std::uint64_t>(kNoLocation));
}

}  // namespace

Agreement::Agreement(Comm& comm, std::uint64_t every_loops)
    : comm_(comm), every_loops_(std::max<std::uint64_t>(every_loops, 1)) {}

bool Agreement::due_at_loop(std::uint64_t loop_index, bool locally_due) {
  if (alone()) return locally_due;
  if (loop_index % every_loops_ != 0) return false;
  return due_now(locally_due);
}

bool Agreement::due_now(bool locally_due) {
  if (alone()) return locally_due;
  return comm_.allreduce_min(locally_due ? 0 : 1) == 0;
}

std::optional<std::string> Agreement::location(const std::optional<std::string>& mine,
                                               const std::vector<std::string>& loops) {
  if (alone()) return mine;
  const long proposal = comm_.rank() != 0 ? kNoProposal : mine ? name_key(*mine) : kNoLocation;
  const long chosen = comm_.allreduce_min(proposal);
  if (chosen == kNoLocation) return std::nullopt;
  const auto it = std::find_if(loops.begin(), loops.end(), [&](const std::string& loop) { return name_key(loop) == chosen; });
  if (it == loops.end()) {
    throw StateError("rank " + std::to_string(comm_.rank()) +
                     " never ran the loop rank 0 chose as checkpoint location; every rank must declare the same "
                     "loops in the same order");
  }
  return *it;
}

}  // namespace resurgo::autockpt
