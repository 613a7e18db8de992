#include "pipeline/in_flight.h"

namespace resurgo {

void InFlightVersions::add(int version, const format::Header& header, const std::vector<Extent>& extents) {
  std::lock_guard lock(mutex_);
  versions_.insert_or_assign(version, Held{header, extents, 0});
}

bool InFlightVersions::read(int version, const Reader& read) {
  Held* held = nullptr;
  {
    std::lock_guard lock(mutex_);
    const auto found = versions_.find(version);
    if (found == versions_.end()) return false;
    held = &found->second;  // a map: stays valid while other versions come and go
    ++held->readers;
  }
  struct Done {
    InFlightVersions& versions;
    Held& held;
    ~Done() {
      {
        std::lock_guard lock(versions.mutex_);
        --held.readers;
      }
      versions.read_done_.notify_all();
    }
  } done{*this, *held};
  read(held->header, held->extents);
  return true;
}

void InFlightVersions::forget(int version) {
  std::unique_lock lock(mutex_);
  const auto found = versions_.find(version);
  if (found == versions_.end()) return;
  read_done_.wait(lock, [&] { return found->second.readers == 0; });
  versions_.erase(found);
}

}  // namespace resurgo
