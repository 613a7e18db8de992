// Prefetcher: adjoint staging (DESIGN.md). The backward pass of an adjoint
// restores the forward states in reverse order; Store::prefetch names that
// order, and this thread copies the next versions from the slower levels
// into the L1 memory level, in that order, as room allows: room that
// Store::discard frees as versions are consumed, or that dropping a
// prefetched copy needed later than the next version makes (the order is
// the future, so the replacement is Belady's optimal one). A restart of a
// prefetched version then reads memory instead of a file. Copies verify
// every chunk; a failed prefetch is reported by the restart that needed it,
// which reads the version from the slower level instead.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/trace.h"
#include "tier/level.h"
#include "tier/memory_level.h"

namespace resurgo {

class Prefetcher {
 public:
  // `sources()`: the levels to copy from, fastest first (asked at each look,
  // as levels appear). The thread starts with the first order.
  Prefetcher(MemoryLevel& memory, std::function<std::vector<Level*>()> sources, const Logger& log, Trace& trace);
  ~Prefetcher();  // a copy in flight finishes first
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The restores to come, in order (a version restored twice appears
  // twice); replaces the previous order. Versions not written yet are
  // fetched once written.
  void set_order(std::vector<int> versions);
  // `version` was restored: its first use in the order is done.
  void restored(int version);
  // The version was discarded: never fetch it again (a copy in flight is
  // dropped when it lands).
  void forget(int version);
  // Something changed (a version was committed, memory was freed): look again.
  void poke();
  // Waits while `version` is being copied; returns why its prefetch failed,
  // if it did (reported once).
  std::optional<std::string> settle(int version);

 private:
  void run();
  // One pass over the order: copies what is due, until a version that
  // waits for room.
  void fetch_due();
  Level* source_of(int version);
  // Frees `bytes` of memory, dropping prefetched copies needed after the
  // restore at `position`; false when that is not enough.
  bool make_room(const std::vector<int>& order, std::size_t position, std::uint64_t bytes);
  // The prefetched copy in memory whose next use comes last, after `position`.
  std::optional<int> needed_last(const std::vector<int>& order, std::size_t position);
  // Copies one version; false when it did not fit after all (memory taken meanwhile).
  bool fetch(int version, Level& source, std::uint64_t bytes);

  MemoryLevel& memory_;
  std::function<std::vector<Level*>()> sources_;
  const Logger& log_;
  Trace& trace_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> order_;
  std::set<int> forgotten_;
  std::set<int> given_up_;    // failed or too large: restart reads them from their level
  std::set<int> prefetched_;  // copied into memory by this thread (their level holds them too)
  std::map<int, std::string> failures_;
  int in_flight_ = -1;
  bool look_again_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace resurgo
