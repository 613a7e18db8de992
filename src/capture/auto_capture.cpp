#include "capture/auto_capture.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "capture/mappings.h"
#include "track/tracker_choice.h"
#include "track/uffd_tracker.h"

namespace resurgo {

namespace {

// Without rates: copy when the state fits the buffer, fork otherwise.
AutoChoice whole_state(const std::vector<RegionRate>& regions, const std::function<bool(std::uint64_t)>& fits,
                       const std::string& why) {
  std::uint64_t total = 0;
  for (const RegionRate& region : regions) total += region.bytes;
  const bool copies = fits(total);
  return {std::vector<bool>(regions.size(), copies), copies ? "copy" : "fork",
          why + (copies ? ": the state is copied (it fits the buffer)" : ": the state is forked (larger than the buffer)")};
}

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", share * 100);
  return text;
}

// "'a' (83.0% written)" for each region of `copied` == `which`.
std::string listed(const std::vector<RegionRate>& regions, const std::vector<bool>& copied, bool which) {
  std::string text;
  for (std::size_t r = 0; r < regions.size(); ++r) {
    if (copied[r] != which) continue;
    text += (text.empty() ? "'" : ", '") + regions[r].label + "' (" + percent(regions[r].written.value_or(0)) + ")";
  }
  return text;
}

// uffd where this kernel has it; another method only when named, since
// hash reads the whole state and mprotect faults on every first write.
std::unique_ptr<track::Tracker> open_rate_tracker(const Config& config, const Logger& log) {
  if (config.track.method != TrackMethod::kAuto) return track::open_tracker(config.track.method, log);
  try {
    return track::make_uffd_tracker();
  } catch (const track::Unavailable& why) {
    log.info(std::string("capture.mode = auto measures no write rate (") + why.what() +
             "): copy when the state fits the buffer, fork otherwise; name a track.method to measure one");
    return nullptr;
  }
}

}  // namespace

AutoChoice choose_per_region(const std::vector<RegionRate>& regions, double copy_above,
                             const std::function<bool(std::uint64_t)>& fits) {
  for (const RegionRate& region : regions) {
    if (!region.written) return whole_state(regions, fits, "no write rate of region '" + region.label + "' yet");
  }
  AutoChoice choice;
  std::uint64_t copied_bytes = 0;
  std::uint64_t forked_bytes = 0;
  for (const RegionRate& region : regions) {
    const bool heavy = region.bytes > 0 && *region.written > copy_above;
    choice.copied.push_back(heavy);
    (heavy ? copied_bytes : forked_bytes) += region.bytes;
  }
  const std::string above = "capture.auto_copy_above = " + percent(copy_above);
  if (forked_bytes == 0) return whole_state(regions, fits, "every region is written above " + above);
  if (forked_bytes < kLeastForkedBytes) {
    return whole_state(regions, fits, "the regions written at most " + above + " hold less than a fork costs");
  }
  if (copied_bytes == 0) {
    return {std::move(choice.copied), "fork", "every region is written at most " + above + ": the state is forked"};
  }
  if (!fits(copied_bytes)) {
    return whole_state(regions, fits, "the regions written above " + above + " do not fit the buffer");
  }
  choice.mode = "copy+fork";
  choice.why = "copies " + listed(regions, choice.copied, true) + ", written above " + above + "; forks " +
               listed(regions, choice.copied, false);
  return choice;
}

AutoCapture::AutoCapture(const CaptureContext& context)
    : context_(context),
      copy_(context),
      fork_(context),
      resting_collapser_(context.log),
      tracker_(open_rate_tracker(context.config, context.log)) {}

AutoCapture::~AutoCapture() { forget_all(); }

const char* AutoCapture::mode(std::uint64_t state_bytes) const {
  if (last_mode_ != nullptr) return last_mode_;
  return copy_.fits(state_bytes) ? copy_.mode(state_bytes) : fork_.mode(state_bytes);
}

void AutoCapture::resize(std::uint64_t state_bytes) {
  resting_collapser_.forget_ranges();  // a region left may be unmapped next
  if (copy_.fits(state_bytes)) copy_.resize(state_bytes);
  fork_.resize(state_bytes);
}

// The region's memory may be unmapped next: no pass may collapse it.
void AutoCapture::forget(int id) {
  const auto found = watched_.find(id);
  if (found == watched_.end()) return;
  resting_collapser_.forget_ranges();
  if (found->second.measurable && !found->second.resting) tracker_->unwatch(id);
  watched_.erase(found);
}

void AutoCapture::forget_all() {
  while (!watched_.empty()) forget(watched_.begin()->first);
}

void AutoCapture::unprotected(int id) { forget(id); }

// A restore writes every byte of the regions (and mprotect, when named,
// would turn its writes into EFAULT): rates start over after it.
void AutoCapture::restarting(bool restarting) {
  copy_.restarting(restarting);
  if (restarting) forget_all();
}

// Forgets the regions moved, resized or gone and watches the new ones.
void AutoCapture::follow(const std::vector<Region>& regions) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    const auto now = std::find_if(regions.begin(), regions.end(), [&](const Region& r) { return r.id == it->first; });
    const bool same = now != regions.end() && now->data == it->second.data && now->bytes == it->second.bytes;
    const int id = it->first;
    ++it;
    if (!same) forget(id);
  }
  for (const Region& region : regions) {
    if (region.bytes == 0 || watched_.count(region.id) != 0) continue;
    Watched watched;
    watched.data = region.data;
    watched.bytes = region.bytes;
    try {
      tracker_->watch(region.id, region.data, region.bytes);
    } catch (const track::Unavailable&) {
      watched.measurable = false;  // its rate stays unknown: the rule without rates applies
    }
    watched_.emplace(region.id, watched);
  }
}

// The share of the region written since the previous version (its last
// one while it rests), and re-arms the tracker. A resting region is watched
// again once its rest is over, and collected at once: the first collect
// reports every page, so the next one gives its rate.
std::optional<double> AutoCapture::rate_of(const Region& region, Watched& watched, TrackingFacts& facts) {
  watched.measured_now = false;
  if (!watched.measurable) return std::nullopt;
  if (watched.resting) {
    if (--watched.rest > 0) return watched.written;
    watched.resting = false;
    try {
      tracker_->watch(region.id, region.data, region.bytes);
      tracker_->collect(region.id, 1);
    } catch (const track::Unavailable&) {
      watched.measurable = false;
      return std::nullopt;
    }
    return watched.written;
  }
  const track::PageSet written = tracker_->collect(region.id, 1);
  if (!std::exchange(watched.collected, true)) return std::nullopt;
  facts.dirty_bytes += std::min<std::uint64_t>(written.count() * track::page_size(), region.bytes);
  facts.tracker = to_string(tracker_->method_of(region.id));
  watched.written = static_cast<double>(written.count()) / static_cast<double>(written.pages());
  watched.measured_now = true;
  return watched.written;
}

std::vector<RegionRate> AutoCapture::measure(const std::vector<Region>& regions, TrackingFacts& facts) {
  std::vector<RegionRate> rates;
  if (tracker_) follow(regions);
  for (const Region& region : regions) {
    const auto found = watched_.find(region.id);
    RegionRate rate{region.label, region.bytes, std::nullopt};
    if (region.bytes == 0) {
      rate.written = 0.0;  // never written
    } else if (found != watched_.end()) {
      rate.written = rate_of(region, found->second, facts);
    }
    rates.push_back(std::move(rate));
  }
  return rates;
}

// The regions copied on a rate measured in this interval stop being
// tracked for kCopiedTrackedEvery - 1 intervals.
void AutoCapture::rest_copied(const std::vector<Region>& regions, const std::vector<bool>& copied) {
  for (std::size_t r = 0; r < regions.size(); ++r) {
    const auto found = watched_.find(regions[r].id);
    if (!copied[r] || found == watched_.end()) continue;
    Watched& watched = found->second;
    if (!watched.measured_now) continue;
    tracker_->unwatch(regions[r].id);
    watched.resting = true;
    watched.rest = kCopiedTrackedEvery - 1;
  }
}

// The whole huge pages of the regions resting now (unwatched, so not
// write-protected any more), collapsed on the collapser's thread; pages
// already huge cost a system call each. The mappings are read once per
// region, when it first rests.
void AutoCapture::collapse_resting(std::int64_t version) {
  std::vector<ByteRange> ranges;
  std::optional<std::vector<Mapping>> mappings;
  std::optional<HugePagePolicy> policy;
  for (auto& [id, watched] : watched_) {
    if (!watched.resting) continue;
    if (!watched.huge_pages) {
      if (!mappings) {
        mappings = mappings_of_this_process();
        policy = HugePagePolicy::of_this_process();
      }
      watched.huge_pages.emplace();
      for (const Mapping& mapping : *mappings) {
        if (!mapping.overlaps(watched.data, watched.bytes)) continue;
        if (const auto part = collapsible_part(mapping, *policy, watched.data, watched.bytes)) {
          watched.huge_pages->push_back(*part);
        }
      }
    }
    ranges.insert(ranges.end(), watched.huge_pages->begin(), watched.huge_pages->end());
  }
  if (ranges.empty()) return;
  resting_collapser_.set_ranges(std::move(ranges));
  resting_collapser_.start(static_cast<int>(version));
}

void AutoCapture::log_change(const AutoChoice& choice, std::int64_t version) {
  const bool same = last_mode_ != nullptr && std::string(last_mode_) == choice.mode && last_copied_ == choice.copied;
  last_mode_ = choice.mode;
  last_copied_ = choice.copied;
  if (same) return;
  context_.log.info("capture.mode = auto from version " + std::to_string(version) + ": " + choice.why);
}

Snapshot AutoCapture::take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                           CaptureTimes& times) {
  resting_collapser_.forget_ranges();  // collapsing races with watching the memory again
  TrackingFacts facts;
  const std::vector<RegionRate> rates = measure(regions, facts);
  const AutoChoice choice = choose_per_region(rates, context_.config.capture.auto_copy_above,
                                              [&](std::uint64_t bytes) { return copy_.fits(bytes); });
  log_change(choice, header.version);
  rest_copied(regions, choice.copied);
  Snapshot snapshot;
  if (std::string(choice.mode) == "copy") {
    snapshot = copy_.take(regions, std::move(header), first_level, times);
  } else if (std::string(choice.mode) == "fork") {
    snapshot = fork_.take(regions, std::move(header), first_level, times);
  } else {
    snapshot = take_split(regions, choice.copied, std::move(header), first_level, times);
  }
  snapshot.tracking = facts;
  collapse_resting(snapshot.header.version);
  return snapshot;
}

// The copied regions go into one block of the buffer first, once the
// previous child is gone (it would share the buffer's pages); the child
// then writes the version from that block and from its image of the other
// regions, and the block is released once it has.
Snapshot AutoCapture::take_split(const std::vector<Region>& regions, const std::vector<bool>& copied,
                                 format::Header header, Level& first_level, CaptureTimes& times) {
  fork_.wait_for_previous_child(times);
  const double waited = times.backpressure_seconds;
  std::vector<Extent> to_copy;
  std::vector<Extent> to_fork;
  for (const Extent& extent : whole_regions(regions)) (copied[extent.region] ? to_copy : to_fork).push_back(extent);
  Snapshot snapshot = copy_.capture(std::move(to_copy), std::move(header), times);
  times.backpressure_seconds += waited;
  snapshot.extents.insert(snapshot.extents.end(), to_fork.begin(), to_fork.end());
  std::sort(snapshot.extents.begin(), snapshot.extents.end(),
            [](const Extent& a, const Extent& b) { return a.region < b.region; });
  const std::function<void()> release = snapshot.release;
  try {
    return fork_.fork_writer(regions, copied, std::move(snapshot), first_level, times);
  } catch (...) {
    if (release) release();  // the block would stay taken forever
    throw;
  }
}

}  // namespace resurgo
