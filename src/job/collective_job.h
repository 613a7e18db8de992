// CollectiveJob: the job of an MPI store (docs/mpi.md). Every rank's call
// is a step of the job: a version is complete at a level only once every
// rank's copy is and the job's manifest says so (CollectiveVersions: two
// phases, off the application's path), it is protected on L3 by partner or
// XOR copies on other nodes (PartnerCopies), and a restart restores the
// newest version every rank can, rebuilding a lost node's L2 from L3 first,
// or redistributes one written by another number of ranks (Redistribution).
// A store whose versions live only in memory keeps them in partner memory
// too (PartnerMemory): complete for the job once every rank holds both
// copies, and read back into L1 at open.
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
#include "job/partner_memory.h"
#include "job/restorable.h"
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
  // The version restart(kLatest) would restore, as far as manifests,
  // headers and indexes tell (job/restorable.h), the same on every rank;
  // none when the job committed no version (every rank sees no manifest of
  // any: a commit a kill interrupted leaves one on some nodes only). Throws,
  // on every rank, when it committed versions but none every rank can
  // restore (restart would fail, and so would starting from scratch:
  // versions must increase).
  std::optional<int> latest() override;
  // The newest version every rank can restore, restored on every rank; a
  // version some rank fails to restore is dropped by all and the next one
  // tried (kLatest), or fails on every rank (a given version). kLatest then
  // clears what is newer than the version restored (clear_newer).
  Restored restart(int version, const RestoreSteps& steps) override;
  void add_stats(std::vector<VersionStats>& stats) override;
  void close() override;

 private:
  // What this rank holds of the job's versions.
  struct Survey {
    std::vector<int> restorable;                       // by this rank, written by this rank count
    std::map<int, format::Manifest> other_rank_count;  // written by another one, redistributable here
    std::vector<std::string> skipped;                  // versions this rank cannot restore, and why
    // The newest version whose job manifest every rank sees; -1: none.
    int newest_committed = -1;
    // Versions of this rank's files the job never committed: no job manifest
    // here, or one newer than newest_committed (a kill between two nodes'
    // manifest writes).
    std::vector<int> orphans;

    std::vector<int> found() const;  // restorable and other_rank_count
  };
  // How this rank's copy of a version stands for the job.
  struct Standing {
    bool committed = true;  // a job manifest names the version
    int other_ranks = 0;    // > 0: written by that many ranks, another count (survey_other_rank_counts)
    std::string problem;    // why this rank cannot restore it; empty: it can
  };

  CollectiveVersions::Hooks hooks();
  // Every version handed over is decided at L2 (and at L4 when `level` is 4);
  // its failures are thrown, prefixed with `call`.
  void drain(const std::string& call, int level);
  void wait_for_partner_copies(int version);
  CopyOwner owner() const;
  Standing standing_of(int version);
  // MismatchError unless `manifest` (read from `path`) is this store's,
  // or restart.accept_foreign is set.
  void check_store(const format::Manifest& manifest, const std::string& path) const;
  // Collective: every rank surveys.
  Survey survey();
  // The versions whose job manifest this rank sees on some directory level.
  std::vector<int> manifest_versions();
  void survey_own_versions(Survey& survey);
  void survey_other_rank_counts(Survey& survey);
  // Once restart(kLatest) restored `restored` on every rank: see the .cpp.
  // `orphans`: the survey's, taken before any rank removed a manifest.
  void clear_newer(int restored, const std::vector<int>& orphans);
  Restored restore(int version, const std::map<int, format::Manifest>& other_rank_count, const RestoreSteps& steps);
  Restored redistribute(const format::Manifest& manifest, const RestoreSteps& steps);
  std::string no_version(const std::string& call, int version, const std::vector<std::string>& skipped) const;
  // StateError when the store's open found versions in partner memory but
  // could restore none of them (and the job holds no other version).
  void refuse_lost_memory(const std::string& call) const;

  JobContext context_;
  SoloJob local_;
  std::unique_ptr<CollectiveVersions> versions_;
  std::unique_ptr<PartnerCopies> partner_;  // L3, when partner.scheme is set
  std::unique_ptr<PartnerMemory> partner_memory_;  // versions only in memory, with a partner scheme
};

}  // namespace resurgo
