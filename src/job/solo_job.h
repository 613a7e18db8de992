// SoloJob: a store whose process decides its versions alone (no
// communicator, or a rank of a launcher's job checkpointing on its own):
// a version is durable at a level once this process wrote it there, and a
// restart reads this process's levels. CollectiveJob runs these local steps
// too, inside its job-wide ones. latest() is the version restart(kLatest)
// would restore as far as headers and indexes tell (job/restorable.h).
#pragma once

#include "job/job.h"
#include "job/restorable.h"

namespace resurgo {

class SoloJob final : public Job {
 public:
  explicit SoloJob(const JobContext& context) : context_(context) {}

  void before_checkpoint(int) override {}
  void checkpoint_failed(int) override {}
  void checkpointed(int, Clock::time_point, const std::vector<Level*>&) override {}
  void wait(int version, int level) override;
  std::optional<int> latest() override;
  // Waits for the versions a restart may read: every pending one for
  // kLatest, else that version's first write (an adjoint's backward pass
  // restores while later versions are still written), unless the capture's
  // buffer still holds the version (RestoreSteps::from_buffer).
  Restored restart(int version, const RestoreSteps& steps) override;
  void add_stats(std::vector<VersionStats>&) override {}
  void close() override {}

 private:
  CopyOwner owner() const;

  JobContext context_;
};

}  // namespace resurgo
