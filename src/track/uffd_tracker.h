// The uffd tracker: userfaultfd write protection in asynchronous mode
// (UFFD_FEATURE_WP_ASYNC), read and re-armed by PAGEMAP_SCAN (Linux >= 6.7).
//
// A write to a protected page never blocks or signals: the kernel lifts the
// protection and so marks the page written. collect() asks PAGEMAP_SCAN for
// the written pages of the region and write-protects them again in the same
// call, atomically per page, so a write racing with collect() is reported
// either now or at the next collect(), never lost.
//
// It reports pages whatever block_pages is, also on transparent huge pages
// (the kernel splits one at its first write). Private anonymous or private
// file memory only: shared and hugetlb mappings throw Unavailable at watch().
#pragma once

#include <memory>

#include "track/tracker.h"

namespace resurgo::track {

// Throws Unavailable with the reason when this kernel lacks userfaultfd,
// UFFD_FEATURE_WP_ASYNC or PAGEMAP_SCAN, or forbids userfaultfd to this
// process.
std::unique_ptr<Tracker> make_uffd_tracker();

}  // namespace resurgo::track
