// Delta capture (capture.mode = "delta"; the Appicpr slides): a version
// holds only the management blocks written since the previous version, its
// base. A Tracker (track.method) reports the written pages of each region; a
// GranularityTuner per region (track.granularity) turns them into the
// blocks to save; the blocks are copied into the staging buffer like a copy
// capture. A full version starts each chain: the first checkpoint, every
// delta.full_every-th one, and whenever the next version cannot rely on the
// previous one (start_new_chain(): another level, a failure, a restart) or
// the protected set changed (a region added, removed, moved or resized).
#pragma once

#include <map>
#include <memory>
#include <optional>

#include "capture/capture.h"
#include "capture/copy_capture.h"
#include "track/granularity_tuner.h"
#include "track/tracker.h"

namespace resurgo {

class DeltaCapture final : public Capture {
 public:
  // Throws ConfigError when track.method names a method this kernel lacks.
  explicit DeltaCapture(const CaptureContext& context);
  ~DeltaCapture() override;

  const char* mode(std::uint64_t state_bytes) const override { return copy_.mode(state_bytes); }
  void resize(std::uint64_t state_bytes) override { copy_.resize(state_bytes); }
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;
  void restarting(bool restarting) override;
  void unprotected(int id) override;
  void start_new_chain(const std::string& why) override;

 private:
  struct Watched {
    std::byte* data;
    std::uint64_t bytes;
    std::string label;
    track::GranularityTuner tuner;
    std::size_t armed_block_pages = 1;  // the block the tracker uses in this interval
    bool collected = false;             // the first collect reports every page: no pattern
  };
  // What one region's interval wrote.
  struct Written {
    track::PageSet blocks;  // pages to save: whole management blocks
    std::uint64_t dirty_bytes = 0;
  };

  // Watches new regions and forgets changed ones; returns why the version
  // must be full ("" when a delta may follow).
  std::string follow(const std::vector<Region>& regions);
  Written collect(int id, Watched& watched);
  void forget(int id);
  void forget_all();

  CaptureContext context_;
  CopyCapture copy_;
  std::unique_ptr<track::Tracker> tracker_;
  std::map<int, Watched> watched_;  // by region id
  std::optional<std::int64_t> previous_version_;
  int deltas_in_chain_ = 0;
  bool full_next_ = true;
  std::string full_reason_ = "the first version";
};

}  // namespace resurgo
