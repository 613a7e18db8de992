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
// would have if there was none. A handler installed after ours must chain to
// it in the same way.
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
//    half of vm.max_map_count pages (32,765 pages, 128 MiB of 4 KiB pages, by
//    default): scattered faults can split watched memory into one kernel
//    mapping per page, and an mprotect failing for lack of mappings inside
//    the handler could only let the process die.
//  - A region must stay mapped while watched, and its protection is the
//    tracker's: the application must not mprotect it meanwhile.
//  - For 100 ms after unwatch(), a write fault in the region's old range is
//    retried rather than passed on (a thread may have faulted just before
//    unwatch() made the pages writable); a foreign fault there, in memory
//    unmapped and mapped again read-only meanwhile, is passed on that late.
#pragma once

#include <memory>

#include "track/tracker.h"

namespace resurgo::track {

// Installs the process's SIGSEGV handler on first use; throws Unavailable if
// sigaction fails.
std::unique_ptr<Tracker> make_mprotect_tracker();

}  // namespace resurgo::track
