// Tracker: which pages of the protected regions the application wrote since
// the previous version (DESIGN.md, "Data flow and modules"; the Appicpr
// slides). A delta capture asks it at each checkpoint and writes only those.
//
// Methods (docs/tracking.md says what each needs from the kernel):
//   uffd        userfaultfd write-protect, asynchronous mode, read and re-armed
//               in one PAGEMAP_SCAN call (Linux >= 6.7)
//   soft-dirty  /proc/self/clear_refs + bit 55 of /proc/self/pagemap (x86_64)
//   mprotect    write protection + a SIGSEGV handler (Appicpr's method)
//   hash        XXH3 of every block, compared with the previous collect's
//
// Granularity: collect() takes the management block for the next interval,
// a power of two of pages (the tuner's choice). A method whose cost depends on
// it reports whole blocks: mprotect takes one fault per block and then lets
// the whole block be written; hash hashes blocks. uffd and soft-dirty always
// report pages.
//
// One Tracker per store; its calls come from one thread at a time (the
// application's, during checkpoint and protect). Tracked memory may be
// written by any thread of the process.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "resurgo/config.hpp"
#include "resurgo/errors.hpp"
#include "track/page_set.h"

namespace resurgo::track {

// The configuration's enum: a tracker's method is never kAuto.
using Method = TrackMethod;


// This kernel, architecture or memory cannot be tracked by the method; the
// message says why (e.g. "soft-dirty: /proc/self/pagemap has no soft-dirty
// bit on aarch64"). `auto` moves on to the next method.
class Unavailable : public StateError {
 public:
  using StateError::StateError;
};

// The method stopped working for every region it tracks (the mprotect
// tracker's SIGSEGV handler was replaced): thrown by collect() once the
// regions' memory is writable again, as unwatch() leaves it. The regions
// stay watched (unwatch() still gives them back); the caller tracks them
// another way from then on.
class MethodLost : public Unavailable {
 public:
  using Unavailable::Unavailable;
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual Method method() const = 0;
  // The method that tracks region `id` (a fallback may track some regions
  // with another one).
  virtual Method method_of(int /*id*/) const { return method(); }

  // Starts tracking region `id`, [base, base + bytes), bytes > 0. Every page
  // counts as written until the first collect(). Throws Unavailable when this
  // memory cannot be tracked by the method (e.g. file-backed or hugetlbfs
  // memory for uffd), InvalidArgumentError for an id already watched.
  virtual void watch(int id, std::byte* base, std::size_t bytes) = 0;

  // Stops tracking region `id` and gives its memory back as it was (write
  // permission, no userfaultfd registration). Unknown ids are ignored.
  virtual void unwatch(int id) = 0;

  // The pages of region `id` written since the previous collect() (every page
  // at the first), then starts over with blocks of `block_pages` pages (a
  // power of two >= 1) for the next interval. The result has one bit per
  // page of the region. An id not watched, or a block_pages that is not a
  // power of two, is an InvalidArgumentError that changes nothing. Memory
  // must stay mapped from watch() to unwatch(): memory unmapped and mapped
  // again in between is a StateError (uffd) or reported as written.
  // MethodLost when the method can track nothing any more.
  virtual PageSet collect(int id, std::size_t block_pages) = 0;
};

// The system page size, and how many pages [base, base + bytes) touches.
std::size_t page_size();
std::size_t pages_spanned(const std::byte* base, std::size_t bytes);

// For the methods' error messages: "region 3 [0x7f.., 0x7f..)".
std::string describe_region(int id, const std::byte* base, std::size_t bytes);

// Whether `method` reports single pages whatever the block (uffd,
// soft-dirty) rather than whole blocks (mprotect, hash).
bool reports_pages(Method method);

// Throws InvalidArgumentError, naming the method and region, unless
// block_pages is a power of two >= 1.
void check_block_pages(std::string_view method, int id, std::size_t block_pages);

}  // namespace resurgo::track
