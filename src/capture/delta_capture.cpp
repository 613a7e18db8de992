#include "capture/delta_capture.h"

#include <algorithm>

#include "track/tracker_choice.h"

namespace resurgo {

DeltaCapture::DeltaCapture(const CaptureContext& context)
    : context_(context), copy_(context), tracker_(track::open_tracker(context.config.track.method, context.log)) {}

DeltaCapture::~DeltaCapture() { forget_all(); }

void DeltaCapture::forget(int id) {
  tracker_->unwatch(id);
  watched_.erase(id);
}

void DeltaCapture::forget_all() {
  while (!watched_.empty()) forget(watched_.begin()->first);
}

void DeltaCapture::start_new_chain(const std::string& why) {
  if (full_next_) return;  // the first reason stays
  full_next_ = true;
  full_reason_ = why;
}

void DeltaCapture::unprotected(int id) {
  if (watched_.count(id) == 0) return;
  forget(id);
  start_new_chain("region " + std::to_string(id) + " was unprotected");
}

// A restore writes into the regions, which a write-protecting tracker
// (mprotect) would turn into EFAULT, and the restored bytes are no delta of
// anything: tracking starts over with the next version, a full one.
void DeltaCapture::restarting(bool restarting) {
  copy_.restarting(restarting);
  if (!restarting) return;
  forget_all();
  start_new_chain("the first version after a restart");
}

std::string DeltaCapture::follow(const std::vector<Region>& regions) {
  std::string changed;
  for (auto it = watched_.begin(); it != watched_.end();) {
    const auto now = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.id == it->first; });
    const bool same = now != regions.end() && now->data == it->second.data && now->bytes == it->second.bytes;
    if (same) {
      ++it;
      continue;
    }
    changed = "region '" + it->second.label + "' was " + (now == regions.end() ? "unprotected" : "moved or resized");
    tracker_->unwatch(it->first);
    it = watched_.erase(it);
  }
  for (const Region& region : regions) {
    if (region.bytes == 0 || watched_.count(region.id) != 0) continue;
    tracker_->watch(region.id, region.data, region.bytes);
    Watched watched{region.data, region.bytes, region.label,
                    track::GranularityTuner::for_setting(context_.config.track.granularity), 1};
    watched.armed_block_pages = watched.tuner.block_pages();
    watched_.emplace(region.id, std::move(watched));
    if (changed.empty()) changed = "region '" + region.label + "' is new";
  }
  return changed;
}

// Reads and re-arms the region's tracking. A tracker that reports whole
// blocks must be armed with the block the tuner wants for the next interval,
// or the tuner would learn from blocks of another size: when the tuner
// changes it, the region is collected once more with the new block (pages
// written in between, normally none, are saved too).
DeltaCapture::Written DeltaCapture::collect(int id, Watched& watched) {
  const bool pages = track::reports_pages(tracker_->method_of(id));
  track::PageSet written = tracker_->collect(id, watched.armed_block_pages);
  Written result;
  result.dirty_bytes = std::min<std::uint64_t>(written.count() * track::page_size(), watched.bytes);
  if (!watched.collected) {
    watched.collected = true;
    result.blocks = std::move(written);
    return result;
  }
  track::GranularityTuner::Decision decision = watched.tuner.observe(written, pages);
  result.blocks = std::move(decision.blocks_to_save);
  if (!pages && decision.next_block_pages != watched.armed_block_pages) {
    result.blocks |= tracker_->collect(id, decision.next_block_pages);
  }
  watched.armed_block_pages = decision.next_block_pages;
  return result;
}

Snapshot DeltaCapture::take(const std::vector<Region>& regions, format::Header header, Level&,
                            CaptureTimes& times) {
  std::string reason = follow(regions);
  if (reason.empty() && full_next_) reason = full_reason_;
  if (reason.empty() && deltas_in_chain_ + 1 >= context_.config.delta.full_every) {
    reason = "delta.full_every = " + std::to_string(context_.config.delta.full_every);
  }
  const bool full = !reason.empty() || !previous_version_;
  // Collecting re-arms the tracker: if this capture fails after it, what the
  // interval wrote is known to no later version, so the next one is full.
  full_next_ = true;
  full_reason_ = "the capture of version " + std::to_string(header.version) + " failed";
  TrackingFacts facts;
  std::uint64_t most_dirty = 0;
  std::vector<Extent> extents;
  const std::uint64_t page = track::page_size();
  for (std::uint32_t r = 0; r < regions.size(); ++r) {
    const Region& region = regions[r];
    if (region.bytes == 0) continue;
    Watched& watched = watched_.at(region.id);
    const std::size_t block = watched.armed_block_pages;
    const Written written = collect(region.id, watched);
    facts.granularity_bytes = std::max<std::uint64_t>(facts.granularity_bytes, block * page);
    if (written.dirty_bytes >= most_dirty) {
      most_dirty = written.dirty_bytes;
      facts.tracker = to_string(tracker_->method_of(region.id));
    }
    facts.dirty_bytes += written.dirty_bytes;
    if (full) {
      extents.push_back({r, 0, region.bytes, region.data});
      continue;
    }
    // Page i is the i-th system page the region touches: the first one may
    // start before the region, the last one end after it.
    const std::uint64_t lead = reinterpret_cast<std::uintptr_t>(region.data) % page;
    written.blocks.for_each_run([&](std::size_t first, std::size_t count) {
      const std::uint64_t begin = first == 0 ? 0 : first * page - lead;
      const std::uint64_t end = std::min<std::uint64_t>(region.bytes, (first + count) * page - lead);
      extents.push_back({r, begin, end - begin, region.data + begin});
    });
  }
  if (full && previous_version_) {
    context_.log.info("version " + std::to_string(header.version) + " is full: " + reason);
  }
  if (!full) header.base_version = *previous_version_;
  const std::int64_t version = header.version;
  Snapshot snapshot = copy_.capture(std::move(extents), std::move(header), times);
  snapshot.tracking = facts;
  previous_version_ = version;
  deltas_in_chain_ = full ? 0 : deltas_in_chain_ + 1;
  full_next_ = false;
  full_reason_.clear();
  return snapshot;
}

}  // namespace resurgo
