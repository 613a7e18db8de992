// The mprotect tracker (Appicpr's method): after each collect() the pages of
// a watched region are read-only; the first write to a management block of
// `block_pages` pages faults, a SIGSEGV handler records the block and makes
// it writable again, and the write is retried. So an interval costs one fault
// per written block: larger blocks mean fewer faults and coarser deltas.
//
// One handler serves every mprotect tracker of the process. It is installed
// by the first make_mprotect_tracker() and never removed; a fault it does not
// own (outside every watched region, or not a write to a page we protected)
// goes to the handler installed before it, or ends the process as SIGSEGV
// would have if there was none.
//
// An application that installs a SIGSEGV handler of its own afterwards
// takes the tracker's faults: watch() and collect() check that the handler
// is still ours, and when it is not, every watched page of the process is
// made writable again at once and collect() throws MethodLost (the caller
// tracks the regions by hashing from then on; tracker_choice.h). Between
// the new handler and the next collect() (the next checkpoint), a write to
// a protected page reaches the application's handler, which must chain to
// the one it replaced; install handlers before protecting, or chain.
//
// Written pages are kept one bit per page: a fault marks its block, and
// every other watched region the block shares a page with (regions that do
// not start or end on a page boundary), before and after making it writable,
// so a write is never lost, even by a collect() that runs meanwhile. A write
// that races with collect() is reported by it or by the next one.
//
// Limits of the method:
//  - A system call that writes into a protected page (read(2) into a watched
//    array, recv, ...) does not fault: it fails with EFAULT. The caller must
//    unwatch a region around such calls.
//  - Watched memory must be mprotect'able page by page and writable:
//    watch() throws Unavailable for memory that is not (hugetlbfs pages,
//    read-only file mappings, unmapped addresses), and makes the rest
//    readable and writable, the state unwatch() gives back.
//  - At most 4096 regions are watched at once in the process, and at most
//    as many pages as vm.max_map_count leaves beside the mappings the
//    process holds when the region is watched and a reserve of half the
//    limit for those it maps later (about 32,000 pages, 128 MiB of 4 KiB
//    pages, by default): scattered faults can split watched memory into one
//    kernel mapping per page, and an mprotect failing for lack of mappings
//    inside the handler could only let the process die. A region past that
//    budget is Unavailable (and tracked by hashing instead).
//  - A region must stay mapped while watched, and its protection is the
//    tracker's: the application must not mprotect it meanwhile.
//  - For 100 ms after unwatch(), a write fault in the region's old range is
//    retried rather than passed on (a thread may have faulted just before
//    unwatch() made the pages writable); a foreign fault there, in memory
//    unmapped and mapped again read-only meanwhile, is passed on that late.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "track/tracker.h"

namespace resurgo::track {

// The kernel's limit on the mappings of a process (vm.max_map_count) and
// how many the process holds (the lines of /proc/self/maps).
struct MappingCount {
  std::size_t limit = 65530;
  std::size_t in_use = 0;
};
MappingCount count_mappings();

// Installs the process's SIGSEGV handler on first use; throws Unavailable if
// sigaction fails. `mappings` is asked at each watch() (tests give a small
// limit).
std::unique_ptr<Tracker> make_mprotect_tracker(std::function<MappingCount()> mappings = count_mappings);

}  // namespace resurgo::track
