// CollectiveJob: the job of an MPI store (docs/mpi.md). Every rank's call
// is a step of the job: a version is complete at a level only once every
// rank's copy is and the job's manifest says so (CollectiveVersions: two
// phases, off the application's path), it is protected on L3 by partner or
// XOR copies on other nodes (PartnerCopies), and a restart restores the
// newest version every rank can, rebuilding a lost node's L2 from L3 first,
// or redistributes one written by another number of ranks (Redistribution).
// The local steps are SoloJob's.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/collective_versions.h"
#include "job/job.h"
#include "job/partner_copies.h"
#include "job/solo_job.h"

namespace resurgo {

class CollectiveJob final : public Job {
 public:
  // Collective: every rank of the communicator constructs it (the store's open).
  explicit CollectiveJob(const JobContext& context);
  ~CollectiveJob() override;

  void before_checkpoint(int version) override;
  void checkpoint_failed(int version) override;
  void checkpointed(int version, Clock::time_point started, const std::vector<Level*>& route) override;
  void wait(int version, int level) override;
  std::optional<int> latest() override;
  // The newest version every rank can restore, restored on every rank; a
  // version some rank fails to restore is dropped by all and the next one
  // tried (kLatest), or fails on every rank (a given version).
  Restored restart(int version, const RestoreSteps& steps) override;
  void add_stats(std::vector<VersionStats>& stats) override;
  void close() override;

 private:
  CollectiveVersions::Hooks hooks();
  // Every version handed over is decided at L2 (and at L4 when `level` is 4);
  // its failures are thrown, prefixed with `call`.
  void drain(const std::string& call, int level);
  void wait_for_partner_copies(int version);
  std::optional<std::string> version_problem(int version);
  // MismatchError unless `manifest` (read from `path`) is this store's,
  // or restart.accept_foreign is set.
  void check_store(const format::Manifest& manifest, const std::string& path) const;
  std::vector<int> candidates(std::vector<std::string>& skipped);
  std::map<int, format::Manifest> other_rank_counts(std::vector<std::string>& skipped);
  Restored restore(int version, const std::map<int, format::Manifest>& other_rank_count, const RestoreSteps& steps);
  Restored redistribute(const format::Manifest& manifest, const RestoreSteps& steps);

  JobContext context_;
  SoloJob local_;
  std::unique_ptr<CollectiveVersions> versions_;
  std::unique_ptr<PartnerCopies> partner_;  // L3, when partner.scheme is set
};

}  // namespace resurgo
