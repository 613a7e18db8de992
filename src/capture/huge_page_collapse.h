// HugePageCollapser: gives the application back the transparent huge pages
// that were split under it. Two things split them. fork() shares each huge
// page with the child through one page-table entry; the parent's first
// write to it during the child's life splits that entry into 512 small-page
// entries and copies the 4 KiB written. The split outlives the child, so
// every later fork copies 512 entries where the first copied one (10-11x the
// first fork's CPU at 2 and 4 GiB, bench/results/fork_repeat.md), and the
// parent's first write to each small page after the child faults. uffd's
// asynchronous write protection resolves the first write to a protected
// huge page by splitting it, and the memory stays in small pages after the
// tracking stops (bench/results/uffd_split.md). MADV_COLLAPSE (Linux >= 6.1)
// copies the memory back into huge pages: after a child has exited, and
// after capture.mode = "auto" stopped tracking a copied region
// (capture/auto_capture.h). The kernel refuses it (EINVAL) on pages still
// write-protected by userfaultfd: tracked memory stays split.
//
// A pass runs on a thread of its own, off the application's path, at the
// pipeline's priority: like the staging buffer's prefault it shortens the
// next checkpoint, and at a lower priority it starves on a busy machine. One huge
// page per call: the next fork stops the pass after the page it is at,
// without waiting (collapsing memory shared with a new child would copy
// it). Only memory that transparent huge pages may back is collapsed
// (HugePagePolicy), never memory the application kept from them. A failure
// (an old kernel, no huge page free) is logged once at debug level and ends
// the pass; a page busy is skipped: it is an optimisation, never an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/byte_ranges.h"
#include "base/log.h"
#include "capture/mappings.h"

namespace resurgo {

// Size of a huge page mapped by one page-table entry (2 MiB on x86_64); 0
// where the kernel has no transparent huge pages.
std::uint64_t huge_page_bytes();

// Whether transparent huge pages may back a mapping: the system mode (`always`, or `madvise` with the mapping
// advised MADV_HUGEPAGE, "hg"), not advised MADV_NOHUGEPAGE ("nh"), and the
// process not opted out (PR_SET_THP_DISABLE). Reads sysfs: call once per
// protected set, not per checkpoint.
class HugePagePolicy {
 public:
  static HugePagePolicy of_this_process();
  bool allows(const Mapping& mapping) const;

 private:
  enum class Mode { kNever, kMadvise, kAlways };
  Mode mode_ = Mode::kNever;
};

// The whole huge pages of [data, data + bytes) inside `mapping`, when
// transparent huge pages may back it; none otherwise.
std::optional<ByteRange> collapsible_part(const Mapping& mapping, const HugePagePolicy& policy, const void* data,
                                          std::uint64_t bytes);

// What every collapser of the process did (tests and benchmarks).
struct HugePageCollapseTotals {
  std::uint64_t passes = 0;           // passes ended, stopped or not
  std::uint64_t collapsed_bytes = 0;  // in huge pages MADV_COLLAPSE accepted
  double cpu_seconds = 0;             // spent by the passes' threads
};
HugePageCollapseTotals huge_page_collapse_totals();

// Off: no pass starts (the baseline of tests and benchmarks). On by default.
void set_huge_page_collapse_for_testing(bool enabled);

class HugePageCollapser {
 public:
  explicit HugePageCollapser(const Logger& log) : log_(log) {}
  ~HugePageCollapser() { forget_ranges(); }
  HugePageCollapser(const HugePageCollapser&) = delete;
  HugePageCollapser& operator=(const HugePageCollapser&) = delete;

  // The memory the next passes collapse, huge-page aligned.
  void set_ranges(std::vector<ByteRange> ranges);
  // Ends the pass in flight, waits for its thread and drops the ranges: the
  // protected set changed and its memory may be unmapped next.
  void forget_ranges();
  // A pass over the ranges starts (the child that wrote `version` has
  // exited, or the tracking of the ranges stopped before it).
  void start(int version);
  // A fork comes: the pass ends after the huge page it is at.
  void request_stop() { stop_.store(true, std::memory_order_relaxed); }

 private:
  void join_pass();
  void run_pass(const std::vector<ByteRange>& ranges, int version);
  // Collapses the huge page at `address`, adding it to `collapsed`; false
  // ends the pass.
  bool collapse(std::uint64_t address, std::uint64_t bytes, std::uint64_t& collapsed);

  const Logger& log_;
  std::mutex mutex_;  // ranges_ and pass_, between the reaping thread and the application's
  std::vector<ByteRange> ranges_;
  std::thread pass_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failure_logged_{false};
};

}  // namespace resurgo
