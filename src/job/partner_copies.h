// L3, partner copies (issue 12; SCR's PARTNER and XOR schemes): once a
// version is complete on L2, every rank's file is protected on other nodes,
// so that the job restarts after losing a node's L2 without reading the
// parallel file system (L4).
//   partner: each rank sends its L2 file to the next rank of the ring
//            (PartnerTopology), which keeps it verified in its node's L3
//            directory <L2>/<store>/partner: 2x the L2 bytes per rank.
//   xor:     the members of a set (set_size ranks on different nodes) split
//            their files, padded to the largest, into set_size - 1 segments;
//            member i keeps the XOR of one segment of every other member
//            (segment (i - j - 1) mod set_size of member j), as a container
//            in <L2>/<store>/xor: set_size / (set_size - 1) x the bytes.
// protect() runs on the job's thread, over the job's communicator. At
// restart, rebuild() gives back their L2 file of the newest protected
// version to the ranks whose node lost it: from the partner's copy, or from
// the other members' files and parities; a set that lost two members, or a
// partner pair that lost both, cannot, and says so (restart then falls back
// to L4).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "job/partner_topology.h"
#include "resurgo/comm.hpp"
#include "resurgo/config.hpp"
#include "tier/directory_level.h"

namespace resurgo {

class PartnerCopies {
 public:

  // This rank's protection of one version.
  struct Outcome {
    double seconds_to_level = 0;  // from checkpoint() until protected here
    double write_seconds = 0;     // the exchange and the write
    std::uint64_t stored_bytes = 0;
    std::string error;  // empty when protected
  };
  struct Rebuild {
    int version = -1;             // the newest protected version, -1 = none
    std::vector<std::string> notes;  // what was rebuilt, or why not
    double seconds = 0;
  };

  // `local`: this rank's L2. `chunk_size`: of parity containers.
  PartnerCopies(PartnerScheme scheme, PartnerTopology topology, int rank, std::string store, DirectoryLevel& local,
                unsigned mode, int keep, std::uint64_t chunk_size, std::shared_ptr<Env> env, const Logger& log);

  // Collective over `job`: protects `version` (complete on L2) on L3.
  void protect(int version, Clock::time_point started, Comm& job);
  std::optional<Outcome> outcome(int version);

  // Collective (restart, the application thread): see the file comment.
  Rebuild rebuild(Comm& comm);

  DirectoryLevel& level() { return l3_; }
  PartnerScheme scheme() const { return scheme_; }

 private:
  Outcome protect_by_partner(int version, std::vector<std::byte> own, Comm& job);
  Outcome protect_by_xor(int version, std::vector<std::byte> own, Comm& job);
  std::vector<std::byte> own_file(int version);

  bool rebuild_from_partner(int version, int lost, const std::vector<long>& flags, Comm& comm, Rebuild& report);
  bool rebuild_from_set(int version, int lost, const std::vector<long>& flags, Comm& comm, Rebuild& report);
  void rebuild_own_file(int version, const std::vector<int>& set, int first, Comm& comm);
  void send_for_rebuild(int version, const std::vector<int>& set, int lost_rank, int first, Comm& comm);
  void restore_own_file(int version, std::vector<std::byte> bytes, const std::string& from);

  PartnerScheme scheme_;
  PartnerTopology topology_;
  int rank_;
  std::string store_;
  DirectoryLevel& local_;
  DirectoryLevel l3_;
  std::uint64_t chunk_size_;
  const Logger& log_;
  std::mutex mutex_;
  std::map<int, Outcome> outcomes_;
};

}  // namespace resurgo
