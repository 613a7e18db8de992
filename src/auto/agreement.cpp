#include "auto/agreement.h"

#include <algorithm>
#include <climits>
#include <string_view>
#include <utility>

#include "auto/fnv.h"
#include "base/newest_everywhere.h"
#include "resurgo/errors.hpp"

namespace resurgo::autockpt {

namespace {

constexpr long kNoProposal = LONG_MAX;      // ranks other than 0
constexpr long kNoLocation = LONG_MAX - 1;  // rank 0 has no candidate

// One exchange's long per rank: 31 bits of the declarations' hash, 31 bits
// of the loop sequence's hash and the due flag. Bit 63 stays clear.
constexpr std::uint64_t k31Bits = (std::uint64_t{1} << 31) - 1;
std::uint64_t declared_bits(long value) { return (static_cast<std::uint64_t>(value) >> 32) & k31Bits; }
std::uint64_t ran_bits(long value) { return (static_cast<std::uint64_t>(value) >> 1) & k31Bits; }
bool due_bit(long value) { return (value & 1) != 0; }
long pack(bool due, const Progress& here) {
  const std::uint64_t declared = here.datasets.declarations_hash() & k31Bits;
  const std::uint64_t ran = here.sequence_hash & k31Bits;
  return static_cast<long>((declared << 32) | (ran << 1) | (due ? 1 : 0));
}

// A loop name as a non-negative long below kNoLocation, the same on every rank.
long name_key(std::string_view name) {
  return static_cast<long>(fnv(kFnvOffset, name) % static_cast<std::uint64_t>(kNoLocation));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string join(const std::vector<std::string>& lines, std::string_view separator) {
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : std::string(separator)) + line;
  return text;
}

// How this rank's declarations differ from rank 0's, in one line.
std::string first_difference(int rank, const std::vector<std::string>& mine, const std::vector<std::string>& zeros) {
  const std::string who = "rank " + std::to_string(rank);
  for (std::size_t i = 0; i < std::min(mine.size(), zeros.size()); ++i) {
    if (mine[i] == zeros[i]) continue;
    return who + " declares dataset " + std::to_string(i) + " as " + mine[i] + " where rank 0 declares " + zeros[i];
  }
  return who + " declares " + std::to_string(mine.size()) + " datasets where rank 0 declares " +
         std::to_string(zeros.size());
}

}  // namespace

Agreement::Agreement(Comm& comm, std::uint64_t every_loops, double timeout_seconds, std::string store_what)
    : comm_(comm),
      every_loops_(std::max<std::uint64_t>(every_loops, 1)),
      timeout_seconds_(timeout_seconds),
      store_what_(std::move(store_what)) {
  if (!alone() && comm_.threads_may_call()) posted_ = std::make_unique<PostedGather>(comm_, timeout_seconds_);
}

bool Agreement::due_at_loop(bool locally_due, const Progress& here) {
  if (alone()) return locally_due;
  if (here.loop_index % every_loops_ != 0) return false;
  if (!pipelined()) return due_now(locally_due, here);
  if (collect_posted(here.datasets)) return true;
  in_flight_ = sent(locally_due, here);
  posted_->post(in_flight_->value);
  return false;
}

bool Agreement::due_now(bool locally_due, const Progress& here) {
  if (alone()) return locally_due;
  if (collect_posted(here.datasets)) return true;
  const Sent now = sent(locally_due, here);
  return decide(values_of(now, [&] { return comm_.allgather(now.value, timeout_seconds_); }), now, here.datasets);
}

Agreement::Sent Agreement::sent(bool locally_due, const Progress& here) const {
  return {pack(locally_due, here), here.loop_index, std::string(here.call), here.datasets.size(), last_exchange_};
}

// The answer of the exchange posted last (false when none is in flight).
bool Agreement::collect_posted(const DatasetTable& datasets) {
  if (!in_flight_) return false;
  const Sent posted = *std::exchange(in_flight_, std::nullopt);
  return decide(values_of(posted, [&] { return posted_->collect(); }), posted, datasets);
}

std::vector<long> Agreement::values_of(const Sent& sent, const std::function<std::vector<long>()>& gather) const {
  try {
    return gather();
  } catch (const StateError& error) {
    throw StateError("automatic checkpointing on " + store_what_ + ": the ranks' agreement " + at(sent) +
                     " failed: " + error.what() +
                     "; a rank died, hangs or runs fewer loops, and no checkpoint is taken here: restart the job, "
                     "which restores the newest checkpoint every rank completed");
  }
}

// Whether a rank found a checkpoint due, once the ranks are known to have
// declared and run the same.
bool Agreement::decide(const std::vector<long>& values, const Sent& sent, const DatasetTable& datasets) {
  const auto differs = [&](auto bits) {
    return std::any_of(values.begin(), values.end(), [&](long value) { return bits(value) != bits(values[0]); });
  };
  if (differs(declared_bits)) throw_declared_otherwise(values, sent, datasets);
  if (differs(ran_bits)) throw_ran_otherwise(values, sent);
  last_exchange_ = sent.loop_index;
  return std::any_of(values.begin(), values.end(), due_bit);
}

// Every rank learns rank 0's declarations, finds its own first difference
// and sends it to rank 0, which sends the whole list back: every rank
// throws the same message.
void Agreement::throw_declared_otherwise(const std::vector<long>& values, const Sent& sent,
                                         const DatasetTable& datasets) {
  std::vector<std::string> mine = datasets.declarations();
  mine.resize(sent.datasets);  // as they were at the exchange
  const std::vector<std::string> zeros = split_lines(rank_zeros(join(mine, "\n")));
  const bool differ = declared_bits(values[static_cast<std::size_t>(comm_.rank())]) != declared_bits(values[0]);
  const std::string lines = collect_at_rank_zero(differ ? first_difference(comm_.rank(), mine, zeros) : "");
  throw MismatchError("automatic checkpointing on " + store_what_ + ": " + at(sent) +
                      " the ranks declared other datasets: " + join(split_lines(lines), "; ") +
                      "; every rank must declare the same datasets (names, element types, halos) in the same "
                      "order; no checkpoint was taken");
}

void Agreement::throw_ran_otherwise(const std::vector<long>& values, const Sent& sent) {
  const int rank = comm_.rank();
  const bool differ = ran_bits(values[static_cast<std::size_t>(rank)]) != ran_bits(values[0]);
  const std::string mine = rank == 0 || differ ? "rank " + std::to_string(rank) + " at '" + sent.call + "'" : "";
  const std::string lines = collect_at_rank_zero(mine);
  throw MismatchError("automatic checkpointing on " + store_what_ + ": at loop " + std::to_string(sent.loop_index) +
                      " the ranks ran other loops " +
                      (sent.since == 0 ? "since the start" : "since loop " + std::to_string(sent.since)) + " (" +
                      join(split_lines(lines), ", ") +
                      "); every rank must run the same loops, with the same arguments, in the same order; no "
                      "checkpoint was taken");
}

// Rank 0's `mine`, on every rank.
std::string Agreement::rank_zeros(const std::string& mine) {
  std::uint64_t bytes = mine.size();
  if (comm_.rank() == 0) {
    for (int to = 1; to < comm_.size(); ++to) {
      comm_.send(to, &bytes, sizeof bytes);
      comm_.send(to, mine.data(), mine.size());
    }
    return mine;
  }
  comm_.receive(0, &bytes, sizeof bytes);
  std::string text(bytes, '\0');
  comm_.receive(0, text.data(), text.size());
  return text;
}

// Every rank's non-empty `mine`, one a line in rank order, on every rank.
std::string Agreement::collect_at_rank_zero(const std::string& mine) {
  if (comm_.rank() != 0) {
    const std::uint64_t bytes = mine.size();
    comm_.send(0, &bytes, sizeof bytes);
    comm_.send(0, mine.data(), mine.size());
    return rank_zeros("");
  }
  std::vector<std::string> lines;
  if (!mine.empty()) lines.push_back(mine);
  for (int from = 1; from < comm_.size(); ++from) {
    std::uint64_t bytes = 0;
    comm_.receive(from, &bytes, sizeof bytes);
    std::string line(bytes, '\0');
    comm_.receive(from, line.data(), line.size());
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return rank_zeros(join(lines, "\n"));
}

std::string Agreement::at(const Sent& sent) {
  return "at loop " + std::to_string(sent.loop_index) + " ('" + sent.call + "')";
}

long Agreement::newest_everywhere(const std::vector<long>& held, long below) {
  return resurgo::newest_everywhere(comm_, held, below - 1);
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
