#include "capture/huge_page_collapse.h"

#include <sys/mman.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <system_error>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1 uapi; older C library headers lack it
#endif

namespace resurgo {

namespace {

constexpr const char* kThpDirectory = "/sys/kernel/mm/transparent_hugepage/";

std::atomic<bool> collapse_enabled{true};
std::atomic<std::uint64_t> total_passes{0};
std::atomic<std::uint64_t> total_collapsed_bytes{0};
std::atomic<std::uint64_t> total_cpu_nanoseconds{0};

std::string first_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::uint64_t thread_cpu_nanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1000000000u + static_cast<std::uint64_t>(now.tv_nsec);
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::uint64_t huge_page_bytes() {
  static const std::uint64_t bytes = [] {
    std::uint64_t value = 0;
    std::istringstream(first_line(std::string(kThpDirectory) + "hpage_pmd_size")) >> value;
    return value;
  }();
  return bytes;
}

// The mode is the bracketed word of the sysfs file ("always [madvise]
// never"). Since Linux 6.8 a file per page size may override it; the size
// collapsed here is the one mapped by a single entry. A process that opted
// out in any way (PR_SET_THP_DISABLE, whole or except where advised) is left
// alone: its choice, not ours.
HugePagePolicy HugePagePolicy::of_this_process() {
  HugePagePolicy policy;
  if (huge_page_bytes() == 0 || ::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) != 0) return policy;
  const auto selected = [](const std::string& line) {
    const std::size_t open = line.find('[');
    const std::size_t close = line.find(']', open);
    return open == std::string::npos || close == std::string::npos ? "" : line.substr(open + 1, close - open - 1);
  };
  std::string mode = selected(first_line(std::string(kThpDirectory) + "hugepages-" +
                                         std::to_string(huge_page_bytes() >> 10) + "kB/enabled"));
  if (mode.empty() || mode == "inherit") mode = selected(first_line(std::string(kThpDirectory) + "enabled"));
  policy.mode_ = mode == "always" ? Mode::kAlways : mode == "madvise" ? Mode::kMadvise : Mode::kNever;
  return policy;
}

bool HugePagePolicy::allows(const Mapping& mapping) const {
  if (mapping.has_flag("nh")) return false;  // MADV_NOHUGEPAGE
  return mode_ == Mode::kAlways || (mode_ == Mode::kMadvise && mapping.has_flag("hg"));
}

std::optional<ByteRange> collapsible_part(const Mapping& mapping, const HugePagePolicy& policy, const void* data,
                                          std::uint64_t bytes) {
  const std::uint64_t huge = huge_page_bytes();
  if (huge == 0 || !policy.allows(mapping)) return std::nullopt;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uint64_t begin = (std::max<std::uint64_t>(first, mapping.begin) + huge - 1) / huge * huge;
  const std::uint64_t end = std::min<std::uint64_t>(first + bytes, mapping.end) / huge * huge;
  if (begin >= end) return std::nullopt;
  return ByteRange{begin, end};
}

HugePageCollapseTotals huge_page_collapse_totals() {
  return {total_passes.load(), total_collapsed_bytes.load(), static_cast<double>(total_cpu_nanoseconds.load()) * 1e-9};
}

void set_huge_page_collapse_for_testing(bool enabled) { collapse_enabled = enabled; }

void HugePageCollapser::set_ranges(std::vector<ByteRange> ranges) {
  std::lock_guard lock(mutex_);
  ranges_ = std::move(ranges);
}

void HugePageCollapser::forget_ranges() {
  std::lock_guard lock(mutex_);
  request_stop();
  join_pass();
  ranges_.clear();
}

void HugePageCollapser::join_pass() {
  if (pass_.joinable()) pass_.join();
}

// The previous pass was stopped by the fork of this child: it ends after
// one huge page, if it has not ended yet.
void HugePageCollapser::start(int version) {
  std::lock_guard lock(mutex_);
  if (!collapse_enabled || ranges_.empty()) return;
  join_pass();
  stop_.store(false, std::memory_order_relaxed);
  try {
    pass_ = std::thread([this, ranges = ranges_, version] { run_pass(ranges, version); });
  } catch (const std::system_error& error) {
    if (!failure_logged_.exchange(true)) {
      log_.debug("huge pages split before version " + std::to_string(version) +
                 " stay split: no thread to collapse them (" + error.what() + ")");
    }
  }
}

void HugePageCollapser::run_pass(const std::vector<ByteRange>& ranges, int version) {
  const std::uint64_t cpu_started = thread_cpu_nanoseconds();
  const std::uint64_t page = huge_page_bytes();
  std::uint64_t wanted = 0;
  std::uint64_t collapsed = 0;
  bool ended_early = false;
  for (const ByteRange& range : ranges) {
    wanted += range.size();
    for (std::uint64_t at = range.begin; at < range.end && !ended_early; at += page) {
      ended_early = stop_.load(std::memory_order_relaxed) || !collapse(at, page, collapsed);
    }
  }
  const std::uint64_t cpu = thread_cpu_nanoseconds() - cpu_started;
  total_passes.fetch_add(1);
  total_collapsed_bytes.fetch_add(collapsed);
  total_cpu_nanoseconds.fetch_add(cpu);
  log_.debug([&] {
    return "huge pages split before version " + std::to_string(version) + ": " + mib(collapsed) + " of " +
           mib(wanted) + " collapsed in " + std::to_string(static_cast<double>(cpu) * 1e-9) + " s of CPU" +
           (ended_early ? " (ended early: the next checkpoint, or a failure logged before)" : "");
  });
}

// EAGAIN (a page busy) skips the page; any other failure ends the pass:
// EINVAL (a kernel before 6.1, memory no longer eligible, or pages
// write-protected by userfaultfd), ENOMEM (no huge page free, or the memory
// unmapped).
bool HugePageCollapser::collapse(std::uint64_t address, std::uint64_t bytes, std::uint64_t& collapsed) {
  if (::madvise(reinterpret_cast<void*>(address), bytes, MADV_COLLAPSE) == 0) {
    collapsed += bytes;
    return true;
  }
  const int error = errno;
  if (!failure_logged_.exchange(true)) {
    char where[32];
    std::snprintf(where, sizeof where, "%#llx", static_cast<unsigned long long>(address));
    log_.debug(std::string("MADV_COLLAPSE of the huge page at ") + where + " failed: " +
               std::strerror(error) + "; the memory stays in small pages (slower, never wrong)");
  }
  return error == EAGAIN;
}

}  // namespace resurgo
