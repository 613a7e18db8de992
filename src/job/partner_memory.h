// Partner memory (issue 31 part 2; the OPS paper's in-memory checkpoints
// with a partner copy): an MPI store whose versions live only in memory
// (memory.every > 0, local.every = persistent.every = 0) and that names a
// partner scheme keeps each version's L1 image twice more in the node's
// shared memory (tmpfs, /dev/shm): this rank's own copy on its node and a
// copy on the node of its partner in the ring (PartnerTopology::holder_of).
// Shared memory outlives the process but not the node: a job killed and
// started again on the same nodes reads the own copies back; a rank whose
// node was lost gets its copy back from the partner's memory, over the
// communicator; nothing is written to a disk.
//
// The copies are container files (checksummed chunks), each committed
// atomically, 0600 and O_EXCL|O_NOFOLLOW, in a directory of the user's own
// (/dev/shm/resurgo-<euid>/memory-<the node's L2 directory>/{own,partner}),
// through the store's Env (DirectoryLevel). A version is complete for the
// job once every rank holds both copies; older copies beyond memory.keep
// are removed then, and every copy when the store closes.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "job/partner_topology.h"
#include "resurgo/comm.hpp"
#include "resurgo/config.hpp"
#include "tier/directory_level.h"
#include "tier/memory_level.h"

namespace resurgo {

class PartnerMemory {
 public:
  // What the store's open found of the job's copies (recover()).
  struct Recovery {
    int version = -1;                // the version back in L1 on every rank, -1: none
    std::vector<std::string> notes;  // a line per rank whose copy came from its partner
    std::string lost;                // versions some copies held that the job could not recover, and why
  };

  // Whether a store configured so keeps its versions in partner memory.
  static bool wanted(const Config& config, int ranks);
  // The directory of this node's copies, for `local_dir` (the node's L2).
  static std::string directory_for(const std::string& local_dir);

  PartnerMemory(PartnerTopology topology, int rank, const std::string& local_dir, MemoryLevel& memory, int keep,
                double timeout_seconds, std::shared_ptr<Env> env, const Logger& log);
  ~PartnerMemory();

  // Collective (the job's step for `version`, once the ranks agreed on it):
  // copies `version`, committed on L1 here (`held` false when it failed
  // there), to both places; true when every rank holds both copies.
  bool replicate(int version, bool held, Comm& comm);
  // Collective (the store's open): the newest version every rank can get
  // back from its own copy or its partner's, into L1.
  Recovery recover(Comm& comm);
  // Versions every rank of the job holds in partner memory.
  std::vector<int> complete() const;
  bool complete(int version) const;
  const Recovery& recovery() const { return recovery_; }
  // The store's close: removes this rank's copies and the ones it holds.
  void close();

 private:
  // Whether the copy of `version` this node keeps for the partner's source
  // rank reads intact, every chunk verified; why not in `problem`.
  bool intact(DirectoryLevel& level, int version, std::string& problem);
  // This rank's own copy of `version` into L1, verified; why not in `problem`.
  bool copy_in(int version, std::string& problem);
  bool restore_version(int version, Comm& comm, Recovery& recovery);
  std::vector<std::byte> held_copy(int version);
  bool fetch_missing(int version, const std::vector<long>& offers, Comm& comm, Recovery& recovery,
                     std::string& problem);
  void protect(int version, Comm& comm);
  std::vector<int> held_versions();

  PartnerTopology topology_;
  int rank_;
  MemoryLevel& memory_;
  double timeout_seconds_;
  const Logger& log_;
  std::string root_;
  DirectoryLevel own_;      // this rank's copies, on its node
  DirectoryLevel partner_;  // the copies of topology_.source_of(rank_), on this node
  mutable std::mutex mutex_;  // complete_: the job's thread adds, the application's reads
  std::set<int> complete_;
  Recovery recovery_;
};

}  // namespace resurgo
