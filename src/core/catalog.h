// Catalog: the state of every version of a store at every level of its route
// (routed, reached, failed), the per-version statistics, the background
// failures not yet reported, and wait(). It owns the mutex that guards them;
// the Scheduler and the Store ask it instead of keeping their own copies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"

namespace resurgo {

class Catalog {
 public:

  explicit Catalog(std::string store_name) : store_(std::move(store_name)) {}

  // A captured version that goes to the levels `route`, in order.
  void add(int version, Clock::time_point started, const std::vector<int>& route, const VersionStats& capture);
  // The capture finished: records how long checkpoint() blocked.
  void set_blocking(int version, double seconds);
  // checkpoint() also waited `seconds` for a level to take earlier versions.
  void add_backpressure(int version, double seconds);
  // The version is durable at `level`.
  void reached(int version, int level, std::uint64_t stored_bytes, double write_seconds);
  // Writing it to `level` failed; the later levels of its route are given up
  // (they would copy from this one).
  void failed(int version, int level, const Error& error);
  // The base_version of `version`'s copy on `level` (-1: full) when the
  // catalog knows it: the captured one, or -1 where compaction rewrote the
  // copy. Per level, since another level may still hold the delta, whose
  // base eviction must keep there.
  std::optional<int> base_of(int version, int level);
  // Compaction rewrote `version`'s copy on `level` as a full version.
  void compacted(int version, int level);
  // Versions that failed at some level since the catalog was made.
  long failure_count();
  // Memory duplicated by copy-on-write while a forked child wrote the version.
  void set_copy_on_write_bytes(int version, std::uint64_t bytes);

  // True while a level after `level` in the version's route has not been
  // reached yet: the copy at `level` is its source and must not be evicted.
  bool pinned(int version, int level);
  bool routed(int version, int level);
  // Versions routed to `level` that have not settled there yet.
  std::vector<int> on_their_way_to(int level);
  // 1 when `version` reached `level`, -1 when it failed there (or gave up),
  // 0 while it is still on its way; none for a version the catalog does not know.
  std::optional<int> outcome(int version, int level);
  bool known(int version);
  // Every version has reached or given up every level of its route.
  bool all_finished();

  // Until `version` is settled at `level`; throws its failure if it did not
  // reach the level. NotFoundError/InvalidArgumentError are the caller's.
  void wait(int version, int level);
  // Until every version is settled at `level`; throws the oldest unreported failure.
  void wait_all(int level);
  // Until every version has settled every level of its route.
  void wait_all_finished();
  // Until `version` has settled the first level of its route (reached or
  // failed), or its whole route; at once for a version the catalog does not know.
  void wait_first_level(int version);
  void wait_finished(int version);
  // Until `version` has settled at `level` (reached, failed or given up);
  // at once for a version the catalog does not know. Throws nothing.
  void wait_settled(int version, int level);
  // Called after each reached(), without the catalog's lock (set it before
  // any version is added).
  void on_reached(std::function<void()> listener);

  // Throws the oldest background failure not yet reported, prefixed by
  // `prefix()` (which says what the throwing call did).
  void report_failure(const std::function<std::string()>& prefix);

  // Adjoint staging: `version` was consumed (Store::discard); no call may
  // name it again.
  void discard(int version);
  bool discarded(int version);

  std::vector<VersionStats> stats();
  // Versions with work left, and whether each is still only in L1 (no level reached).
  std::map<int, bool> pending();

 private:
  struct Failure {
    ErrorCode code;
    std::string message;
    bool reported = false;
  };
  struct Entry {
    VersionStats stats;
    Clock::time_point started;
    std::vector<int> route;
    std::vector<int> reached;
    std::vector<int> compacted;  // levels where the copy is full now
    std::optional<Failure> failure;
    std::size_t settled_levels = 0;  // levels of the route reached or given up
    bool finished() const { return settled_levels == route.size(); }
  };

  using Entries = std::map<int, Entry>;  // a map: an Entry& stays valid while others come and go

  static bool captured_is_enough(const Entry& entry, int level);
  bool settled(const Entry& entry, int level) const;
  Entries::iterator find_entry(int version);
  Entry& entry(int version);  // adds an empty one for a version not known
  [[noreturn]] void throw_failure(int version, Entry& entry, const std::string& prefix);
  void forget_old_entries();

  std::string store_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Entries entries_;
  std::set<int> discarded_;
  int unreported_failures_ = 0;
  long failures_ = 0;
  std::function<void()> listener_;
};

}  // namespace resurgo
