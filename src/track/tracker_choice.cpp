#include "track/tracker_choice.h"

#include <map>
#include <string>
#include <utility>

#include "core/config_names.h"
#include "track/hash_tracker.h"
#include "track/mprotect_tracker.h"
#include "track/soft_dirty_tracker.h"
#include "track/uffd_tracker.h"

namespace resurgo::track {

namespace {

// In auto's order of preference.
struct MethodMaker {
  Method method;
  std::unique_ptr<Tracker> (*make)();
};
constexpr MethodMaker kMakers[] = {{Method::kUffd, make_uffd_tracker},
                                   {Method::kSoftDirty, make_soft_dirty_tracker},
                                   {Method::kMprotect, [] { return make_mprotect_tracker(); }},
                                   {Method::kHash, make_hash_tracker}};

bool auto_takes(Method method) { return method == Method::kUffd || method == Method::kHash; }

// The chosen tracker, with hash for the regions it cannot watch.
class FallbackTracker final : public Tracker {
 public:
  FallbackTracker(std::unique_ptr<Tracker> chosen, const Logger& log) : chosen_(std::move(chosen)), log_(log) {}

  Method method() const override { return chosen_->method(); }
  Method method_of(int id) const override {
    const auto found = owner_.find(id);
    return found == owner_.end() ? chosen_->method() : found->second.tracker->method();
  }

  void watch(int id, std::byte* base, std::size_t bytes) override {
    if (owner_.count(id) != 0) throw InvalidArgumentError("region " + std::to_string(id) + " is already tracked");
    try {
      chosen_->watch(id, base, bytes);
      owner_[id] = {chosen_.get(), base, bytes};
    } catch (const Unavailable& why) {
      hash().watch(id, base, bytes);
      owner_[id] = {hash_.get(), base, bytes};
      log_fallback("region " + std::to_string(id) + " is tracked by hash: " + why.what());
    }
  }

  void unwatch(int id) override {
    const auto found = owner_.find(id);
    if (found == owner_.end()) return;
    found->second.tracker->unwatch(id);
    owner_.erase(found);
  }

  PageSet collect(int id, std::size_t block_pages) override {
    const auto found = owner_.find(id);
    if (found == owner_.end()) throw InvalidArgumentError("region " + std::to_string(id) + " is not tracked");
    PageSet written;
    try {
      written = found->second.tracker->collect(id, block_pages);
    } catch (const MethodLost& why) {
      move_to_hash(why.what());
      written = hash_->collect(id, block_pages);  // the first collect: every page
    }
    log_block(id, found->second, block_pages);
    return written;
  }

 private:
  struct Owner {
    Tracker* tracker = nullptr;
    std::byte* base = nullptr;
    std::size_t bytes = 0;
    std::size_t block_pages = 0;  // armed by the last collect; 0 before the first
  };

  // Where the granularity rule (track.granularity) takes each region: a
  // debug line when its block changes, for whoever compares the rules.
  void log_block(int id, Owner& owner, std::size_t block_pages) {
    if (std::exchange(owner.block_pages, block_pages) == block_pages) return;
    log_.debug([&] {
      return "region " + std::to_string(id) + ": management block of " + std::to_string(block_pages * page_size()) +
             " bytes from the next interval";
    });
  }

  Tracker& hash() {
    if (!hash_) hash_ = make_hash_tracker();
    return *hash_;
  }

  void log_fallback(const std::string& line) {
    if (std::exchange(warned_, true)) {
      log_.info(line);
    } else {
      log_.warn(line);
    }
  }

  // Every region of the chosen method goes to hash, whose first collect
  // reports it whole: the writes the lost method missed are in the next version.
  void move_to_hash(const std::string& why) {
    std::string ids;
    for (auto& [id, owner] : owner_) {
      if (owner.tracker != chosen_.get()) continue;
      try {
        chosen_->unwatch(id);
      } catch (const Error&) {
        // Forgotten all the same; the lost method made its memory writable already.
      }
      hash().watch(id, owner.base, owner.bytes);
      owner.tracker = hash_.get();
      ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    }
    warned_ = true;
    log_.warn(why + "; the regions it tracked (ids " + ids + ") are tracked by hash from now on");
  }

  std::unique_ptr<Tracker> chosen_;
  std::unique_ptr<Tracker> hash_;  // made when a region needs it
  std::map<int, Owner> owner_;
  const Logger& log_;
  bool warned_ = false;  // the first fallback is a warning, later ones are info
};

std::unique_ptr<Tracker> choose(TrackMethod asked, const Logger& log) {
  std::string unavailable;  // why each method tried could not run, "; " between them
  for (const auto& [method, make] : kMakers) {
    if (asked == TrackMethod::kAuto ? !auto_takes(method) : asked != method) continue;
    try {
      std::unique_ptr<Tracker> tracker = make();
      if (asked == TrackMethod::kAuto) {
        log.info("track.method = auto chose " + std::string(to_string(method)) +
                 (unavailable.empty() ? "" : "; " + unavailable));
      }
      return tracker;
    } catch (const Unavailable& why) {
      unavailable += (unavailable.empty() ? "" : "; ") + std::string(why.what());
    }
  }
  throw ConfigError("track.method = \"" + std::string(to_string(asked)) + "\" is not available here: " + unavailable);
}

}  // namespace

std::unique_ptr<Tracker> open_tracker(TrackMethod method, const Logger& log) {
  return std::make_unique<FallbackTracker>(choose(method, log), log);
}

}  // namespace resurgo::track
