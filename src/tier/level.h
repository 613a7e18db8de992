// Level: where whole versions live (DESIGN.md, "Data flow and modules").
// A level commits a version atomically (it is visible only once complete),
// lists, opens, quarantines and removes versions, and evicts old ones. The
// Scheduler routes versions through the levels the configuration names;
// restore reads them back, fastest level first.
#pragma once

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "resurgo/env.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"  // kL0 ... kL4

namespace resurgo {

// Thrown by commit() of a level with bounded space (the memory level) when
// the version does not fit in what the level holds now. The Scheduler then
// evicts what the level's keep allows and tries once more.
class LevelFullError : public StorageError {
 public:
  using StorageError::StorageError;
};

// A version waiting in a level's queue, for commit_group: its bytes come
// from `write` (the first level of its route) or, when `source` is set, from
// a committed copy on another level (as commit_copy takes them).
struct PendingCommit {
  int version = 0;
  std::function<void(WritableFile&)> write;
  const ReadableFile* source = nullptr;
};

// The base of a version the caller knows (-1 for a full version), none for
// one it does not know: the level then reads the base from its copy.
using KnownBases = std::function<std::optional<int>(int)>;

class Level {
 public:
  // What the Scheduler and restore may assume about a level.
  struct Features {
    bool is_volatile = false;  // lost with the process (memory levels)
    bool node_local = false;   // lost with the node (L2, L0)
    bool collective = false;   // a version is complete only when every rank's copy is
    bool device = false;       // in GPU memory (L0): holds device images, not container files
  };

  virtual ~Level() = default;

  virtual int number() const = 0;  // kL0 device ... kL4 persistent
  virtual Features features() const = 0;
  virtual std::string where() const = 0;  // for messages: a directory, a device

  // Makes the level ready (creates directories, removes what dead writers left).
  virtual void prepare() = 0;
  // Writes `version` through `write` and makes it visible only when complete
  // and durable. On failure nothing becomes visible.
  virtual void commit(int version, const std::function<void(WritableFile&)>& write) = 0;
  // Copies a committed version from another level, chunk by chunk, verifying
  // every checksum on the way: a damaged source fails the copy (the error
  // names the chunk) and nothing is committed.
  virtual void commit_copy(int version, const ReadableFile& source) = 0;
  // Commits every version of `group`, each as atomically as commit() (or
  // commit_copy()) would; a failure fails the versions it touched only.
  // Returns, in the order of `group`, null for each version committed and
  // the Error of each that failed (anything else is thrown). The default
  // commits them one by one; a directory level makes them durable together.
  virtual std::vector<std::exception_ptr> commit_group(const std::vector<PendingCommit>& group);

  virtual std::vector<int> versions() = 0;  // committed versions of this rank, ascending
  virtual bool holds(int version) = 0;
  virtual std::unique_ptr<ReadableFile> open(int version) = 0;
  // Sets a damaged copy aside (kept for inspection, never restored).
  virtual void quarantine(int version) = 0;
  // Removes one committed version (`resurgo rm`, discard).
  virtual void remove(int version) = 0;
  // Removes the versions beyond the level's newest `keep`, except those for
  // which `pinned(version)` is true (asked after listing), and never breaks a
  // chain: the base of every version kept is kept too, transitively. Removes
  // newest first, so that a crash part way leaves no delta without its base.
  // Returns the removed versions, ascending. `known_bases` spares reading
  // the files of versions the caller wrote: an I/O error there would stop
  // the eviction.
  virtual std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases = {}) = 0;

  // The base of a delta version: from `known_bases` when it knows the
  // version, else read from the copy here.
  // None for a full version, or for a copy that is gone or damaged (its
  // chain is broken already). Throws StorageError when the copy cannot be read.
  std::optional<int> base_of(int version, const KnownBases& known_bases = {});
};

// Committed versions of this rank on `levels`, each with the numbers of the
// levels holding a copy (in the order of `levels`).
std::map<int, std::vector<int>> committed_versions(const std::vector<Level*>& levels);

// Copies `version` into `target` from the first of `sources` holding it, its
// bases first, so that `target` never holds a delta it cannot restore;
// nothing for a version `target` holds already. False when no source holds
// it (or one of its bases).
bool copy_with_bases(const std::vector<Level*>& sources, int version, Level& target);

// The numbers of `levels`, in order.
std::vector<int> level_numbers(const std::vector<Level*>& levels);

}  // namespace resurgo
