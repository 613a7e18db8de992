// The soft-dirty tracker: the kernel sets bit 55 of a page's /proc/self/pagemap
// entry when the page is written, and writing "4" to /proc/self/clear_refs
// clears the bits (Documentation/admin-guide/mm/soft-dirty.rst). Needs
// CONFIG_MEM_SOFT_DIRTY, which in practice means x86_64 (Linux >= 3.11).
// Always reports pages, whatever block_pages is.
//
// clear_refs has no narrower scope than the whole process, so trackers would
// erase each other's bits. All the trackers of a process share one
// coordinator: before each clear it reads the bits of every watched region
// and keeps them as that region's pending pages until its own collect().
//
// Limits, all of the soft-dirty bit itself:
// - The bits are read, then cleared, in two steps. A write to ANOTHER
//   tracker's region between the two is lost to that tracker; a write to the
//   region being collected is not (its copy starts after collect returns).
//   Several soft-dirty stores in one process are therefore exact only when
//   no thread writes one store's memory while another store collects;
//   otherwise use uffd, which reads and re-arms one region atomically.
// - Memory given back to the kernel (madvise MADV_DONTNEED / MADV_FREE)
//   reads as zeros afterwards without being written, and is not reported.
// - Anything else in the process that writes clear_refs (a checkpointer such
//   as CRIU working on this process) erases the bits the same way.
// - Memory unmapped and mapped again at the same address comes back
//   soft-dirty (a new mapping is soft-dirty as a whole), and a transparent
//   huge page has one bit for all its pages: pages reported as written
//   although they may not be. Harmless: pages copied that need not be.
#pragma once

#include <cstddef>
#include <memory>

#include "track/page_set.h"
#include "track/tracker.h"

namespace resurgo::track {

// A tracker on the process's coordinator. Throws Unavailable when this
// architecture or kernel has no working soft-dirty bit (checked once, on a
// page of its own).
std::unique_ptr<Tracker> make_soft_dirty_tracker();

// What the soft-dirty trackers need from the kernel; an interface so that
// tests can check the coordination where the kernel has no soft-dirty bit.
class SoftDirtyKernel {
 public:
  virtual ~SoftDirtyKernel() = default;
  // Clears the bit of every page of the process.
  virtual void clear_all() = 0;
  // Inserts into `written` the pages of [base, base + bytes) whose bit is
  // set (page numbering of PageSet).
  virtual void read(const std::byte* base, std::size_t bytes, PageSet& written) = 0;
};

// The trackers made on one coordinator share its kernel and keep each
// other's bits; trackers on different coordinators do not (tests only: the
// process has one, behind make_soft_dirty_tracker()).
class SoftDirtyCoordinator;
std::shared_ptr<SoftDirtyCoordinator> make_soft_dirty_coordinator(
    std::shared_ptr<SoftDirtyKernel> kernel);
std::unique_ptr<Tracker> make_soft_dirty_tracker(std::shared_ptr<SoftDirtyCoordinator> coordinator);

}  // namespace resurgo::track
