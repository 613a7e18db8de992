// Which Tracker a store uses (`track.method`): the one named, or for auto
// uffd where this kernel offers it, else hash. Auto takes only the methods
// that are exact whatever the application does: soft-dirty loses writes to
// one store's memory made while another store of the process collects (the
// bits are process-wide), and under mprotect a system call that writes into
// tracked memory (read(2) into an array) fails with EFAULT. Both are there
// for the applications that can live with that, by name. A region
// the chosen method cannot watch (file-backed or hugetlbfs memory for uffd,
// memory mprotect refuses, or past its budget of mappings) is tracked by
// hash instead: every region is tracked, whatever its memory. When the
// method stops working altogether (MethodLost: the application replaced
// mprotect's SIGSEGV handler), every region it tracked moves to hash. The
// first fallback is a warning in the log, later ones are info lines.
#pragma once

#include <memory>
#include <string_view>

#include "base/log.h"
#include "track/tracker.h"

namespace resurgo::track {

// A named method this kernel lacks throws ConfigError with the reason; auto
// logs its choice at info level.
std::unique_ptr<Tracker> open_tracker(TrackMethod method, const Logger& log);

}  // namespace resurgo::track
