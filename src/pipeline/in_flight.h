// InFlightVersions: the versions on their way to their first level whose
// bytes lie in host memory meanwhile (a full version of host regions in the
// capture's staging buffer), so that a restart of one need not wait for
// that write. On a directory level the write is a group commit (the
// fdatasyncs of the versions waiting, then a directory fsync), and an
// adjoint's reverse pass restores a version saved a moment before at each
// turn (issue 27). The Scheduler adds a version when it takes its snapshot
// and forgets it before the snapshot's memory goes back (Snapshot::release);
// forget() waits for the reads under way.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "format/container.h"
#include "format/extent.h"

namespace resurgo {

class InFlightVersions {
 public:
  using Reader = std::function<void(const format::Header& header, const std::vector<Extent>& extents)>;

  // `extents`' bytes stay where they are until forget(version).
  void add(int version, const format::Header& header, const std::vector<Extent>& extents);
  // Calls `read` with the version's header and extents, whose bytes stay
  // put until it returns; false, without calling it, when the version is
  // not (or no longer) in flight.
  bool read(int version, const Reader& read);
  // Once no read of `version` runs, it is no longer in flight.
  void forget(int version);

 private:
  struct Held {
    format::Header header;
    std::vector<Extent> extents;
    int readers = 0;
  };

  std::mutex mutex_;
  std::condition_variable read_done_;
  std::map<int, Held> versions_;
};

}  // namespace resurgo
