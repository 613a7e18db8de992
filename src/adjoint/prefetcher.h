// Prefetcher: adjoint staging (DESIGN.md). The backward pass of an adjoint
// restores the forward states in reverse order, once each; Store::prefetch
// names that order, and this thread copies the next versions from the
// slower levels into the L1 memory level, in that order, as room allows
// (room that Store::discard frees as versions are consumed). A restart of a
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

#include "core/log.h"
#include "core/trace.h"
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

  // The versions in the order they will be restored; replaces the previous
  // order. Versions not written yet are fetched once written.
  void set_order(std::vector<int> versions);
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
  std::set<int> given_up_;  // failed or too large: restart reads them from their level
  std::map<int, std::string> failures_;
  int in_flight_ = -1;
  bool look_again_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace resurgo
