// Auto capture (capture.mode = "auto"): copy or fork, chosen per region
// from the share of it the application wrote in the last interval, as a
// Tracker measures it (uffd where the kernel has it; track.method names
// another). Copying costs the application a memcpy of the region at
// checkpoint(); forking costs it little then, but every page it writes
// while the child writes the version is a copy-on-write fault. So a region
// written above capture.auto_copy_above of its bytes per interval is
// copied into the staging buffer on the application thread, and the others
// are left to a forked child, which writes the whole version (one header,
// one commit) from its image of them and from the buffer.
//
// Whenever the split cannot be used, the rule without rates applies: copy
// when the state fits the buffer, fork otherwise. That is the case for the
// first version (no rate yet), after a restart or a change of the protected
// set, for memory the tracker cannot watch, without a tracker, when every
// region is write-heavy, when the write-heavy regions do not fit the
// buffer, and when the regions to fork hold less than kLeastForkedBytes.
// When every region is read-mostly, the whole state is forked.
//
// Tracking costs the application a fault per page at its first write in an
// interval (uffd), as much as copying the page: a copied region is tracked
// again only for one interval in kCopiedTrackedEvery, and keeps its last
// rate in between. Read-mostly regions fault little and are always tracked.
//
// uffd splits each transparent huge page at its first write while tracked,
// and the memory stays in small pages (more TLB misses) after the tracking
// stops. So while a copied region rests, its huge pages are collapsed again
// (HugePageCollapser, on its own thread) after each checkpoint. Tracked
// memory is never collapsed: the kernel refuses it while it is
// write-protected. The pass is stopped, and waited for (one huge page at
// most), at the next checkpoint, before the region is watched again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "capture/copy_capture.h"
#include "capture/fork_capture.h"
#include "capture/huge_page_collapse.h"
#include "track/tracker.h"

namespace resurgo {

// Below this many bytes to fork, copying them costs about as much as a
// fork, which copies the page tables of the whole process and starts a
// child: the regions are then copied with the others.
inline constexpr std::uint64_t kLeastForkedBytes = std::uint64_t{4} << 20;

// A copied region is tracked for one interval in this many.
inline constexpr int kCopiedTrackedEvery = 8;

// One region as the rule sees it.
struct RegionRate {
  std::string label;
  std::uint64_t bytes = 0;
  std::optional<double> written;  // share of its bytes written in the last interval; none: not measured
};

struct AutoChoice {
  std::vector<bool> copied;  // per region: copied into the buffer, else forked
  const char* mode = "copy";  // "copy", "fork" or "copy+fork"
  std::string why;            // for the log
};

// The rule: `fits(bytes)` says whether that many bytes fit the staging buffer.
AutoChoice choose_per_region(const std::vector<RegionRate>& regions, double copy_above,
                             const std::function<bool(std::uint64_t)>& fits);

class AutoCapture final : public Capture {
 public:
  // Throws ConfigError when track.method names a method this kernel lacks.
  explicit AutoCapture(const CaptureContext& context);
  ~AutoCapture() override;

  // The last version's mode ("copy+fork" when it was split).
  const char* mode(std::uint64_t state_bytes) const override;
  void resize(std::uint64_t state_bytes) override;
  Snapshot take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                CaptureTimes& times) override;
  void restarting(bool restarting) override;
  void unprotected(int id) override;

 private:
  struct Watched {
    std::byte* data = nullptr;
    std::uint64_t bytes = 0;
    bool measurable = true;  // the tracker can watch it
    bool collected = false;  // the first collect reports every page: no rate
    bool resting = false;    // copied: not watched until `rest` intervals passed
    int rest = 0;
    std::optional<double> written;  // the last rate measured
    bool measured_now = false;      // `written` is this interval's
    // Its whole huge pages that transparent huge pages may back: read from
    // /proc/self/smaps when it first rests.
    std::optional<std::vector<ByteRange>> huge_pages;
  };

  std::vector<RegionRate> measure(const std::vector<Region>& regions, TrackingFacts& facts);
  void follow(const std::vector<Region>& regions);
  std::optional<double> rate_of(const Region& region, Watched& watched, TrackingFacts& facts);
  void rest_copied(const std::vector<Region>& regions, const std::vector<bool>& copied);
  void collapse_resting(std::int64_t version);
  void forget(int id);
  void forget_all();
  Snapshot take_split(const std::vector<Region>& regions, const std::vector<bool>& copied, format::Header header,
                      Level& first_level, CaptureTimes& times);
  void log_change(const AutoChoice& choice, std::int64_t version);

  CaptureContext context_;
  CopyCapture copy_;
  ForkCapture fork_;
  HugePageCollapser resting_collapser_;  // the resting regions' huge pages, split while tracked
  std::unique_ptr<track::Tracker> tracker_;  // null: no rate is measured
  std::map<int, Watched> watched_;           // by region id
  const char* last_mode_ = nullptr;
  std::vector<bool> last_copied_;
};

}  // namespace resurgo
