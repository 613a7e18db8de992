#include "track/tracker_choice.h"

#include <map>
#include <string>
#include <vector>

#include "track/hash_tracker.h"
#include "track/mprotect_tracker.h"
#include "track/soft_dirty_tracker.h"
#include "track/uffd_tracker.h"

namespace resurgo::track {

namespace {

constexpr Method kMethods[] = {Method::kUffd, Method::kSoftDirty, Method::kMprotect, Method::kHash};

bool auto_takes(Method method) { return method == Method::kUffd || method == Method::kHash; }

std::unique_ptr<Tracker> make(Method method) {
  switch (method) {
    case Method::kUffd:
      return make_uffd_tracker();
    case Method::kSoftDirty:
      return make_soft_dirty_tracker();
    case Method::kMprotect:
      return make_mprotect_tracker();
    case Method::kHash:
      return make_hash_tracker();
  }
  throw InvalidArgumentError("unknown tracking method");
}

// The chosen tracker, with hash for the regions it cannot watch.
class FallbackTracker final : public Tracker {
 public:
  FallbackTracker(std::unique_ptr<Tracker> chosen, const Logger& log) : chosen_(std::move(chosen)), log_(log) {}

  Method method() const override { return chosen_->method(); }
  Method method_of(int id) const override {
    const auto found = owner_.find(id);
    return found == owner_.end() ? chosen_->method() : found->second->method();
  }

  void watch(int id, std::byte* base, std::size_t bytes) override {
    if (owner_.count(id) != 0) throw InvalidArgumentError("region " + std::to_string(id) + " is already tracked");
    try {
      chosen_->watch(id, base, bytes);
      owner_[id] = chosen_.get();
    } catch (const Unavailable& why) {
      if (!hash_) hash_ = make_hash_tracker();
      hash_->watch(id, base, bytes);
      owner_[id] = hash_.get();
      log_.info("region " + std::to_string(id) + " is tracked by hash: " + why.what());
    }
  }

  void unwatch(int id) override {
    const auto found = owner_.find(id);
    if (found == owner_.end()) return;
    found->second->unwatch(id);
    owner_.erase(found);
  }

  PageSet collect(int id, std::size_t block_pages) override {
    const auto found = owner_.find(id);
    if (found == owner_.end()) throw InvalidArgumentError("region " + std::to_string(id) + " is not tracked");
    return found->second->collect(id, block_pages);
  }

 private:
  std::unique_ptr<Tracker> chosen_;
  std::unique_ptr<Tracker> hash_;  // made when a region needs it
  std::map<int, Tracker*> owner_;
  const Logger& log_;
};

std::unique_ptr<Tracker> choose(std::string_view name, const Logger& log) {
  std::vector<std::string> reasons;
  for (Method method : kMethods) {
    if (name == "auto" ? !auto_takes(method) : name != method_name(method)) continue;
    try {
      std::unique_ptr<Tracker> tracker = make(method);
      if (name == "auto") {
        std::string why;
        for (const std::string& reason : reasons) why += "; " + reason;
        log.info("track.method = auto chose " + std::string(method_name(method)) + why);
      }
      return tracker;
    } catch (const Unavailable& why) {
      reasons.push_back(why.what());
    }
  }
  if (reasons.empty()) {
    throw ConfigError("track.method = \"" + std::string(name) +
                      "\" is not a tracking method; use auto, uffd, soft-dirty, mprotect or hash");
  }
  throw ConfigError("track.method = \"" + std::string(name) + "\" is not available here: " + reasons.front());
}

}  // namespace

std::unique_ptr<Tracker> open_tracker(std::string_view method, const Logger& log) {
  return std::make_unique<FallbackTracker>(choose(method, log), log);
}

}  // namespace resurgo::track
