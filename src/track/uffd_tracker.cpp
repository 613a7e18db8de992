#include "track/uffd_tracker.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "track/linux_uapi.h"

namespace resurgo::track {
namespace {

constexpr const char* kUseHash = "; set track.method = hash";

// A page-aligned address range [begin, end).
struct AddressRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;

  bool empty() const { return begin >= end; }
  std::uint64_t length() const { return end - begin; }
};

uffdio_range as_uffdio_range(AddressRange range) { return {range.begin, range.length()}; }

AddressRange intersect(AddressRange a, AddressRange b) {
  return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

AddressRange pages_of(const std::byte* base, std::size_t bytes) {
  const std::uintptr_t page = page_size();
  const auto first = reinterpret_cast<std::uintptr_t>(base);
  return {first / page * page, (first + bytes + page - 1) / page * page};
}

std::string where(int id, AddressRange range) {
  std::ostringstream text;
  text << "uffd: region " << id << " [0x" << std::hex << range.begin << ", 0x" << range.end << ")";
  return text.str();
}

std::string errno_text(int error) { return std::strerror(error); }

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor& operator=(FileDescriptor&&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// vm.unprivileged_userfaultfd = 0 still lets an unprivileged process handle
// the faults of its own user-mode accesses (UFFD_USER_MODE_ONLY, Linux 5.11);
// older kernels reject the flag, hence the second try. The flag loses nothing
// here: in asynchronous mode the kernel resolves its own writes (a read(2)
// into tracked memory) without asking the userfaultfd either.
FileDescriptor open_userfaultfd() {
  int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
  if (fd < 0) fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC));
  if (fd >= 0) return FileDescriptor(fd);
  const int error = errno;
  std::string reason = "uffd: userfaultfd() failed: " + errno_text(error);
  if (error == ENOSYS) reason += " (kernel built without CONFIG_USERFAULTFD)";
  if (error == EPERM) reason += " (forbidden by vm.unprivileged_userfaultfd or a seccomp filter)";
  throw Unavailable(reason + kUseHash);
}

// Enables the userfaultfd API with `features`; features = 0 asks which the
// kernel offers, returned as the result.
std::uint64_t enable_api(const FileDescriptor& uffd, std::uint64_t features) {
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = features;
  if (::ioctl(uffd.get(), UFFDIO_API, &api) != 0) {
    throw Unavailable("uffd: UFFDIO_API failed: " + errno_text(errno) + kUseHash);
  }
  return api.features;
}

FileDescriptor open_pagemap() {
  FileDescriptor pagemap(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (pagemap.get() < 0) {
    throw Unavailable("uffd: cannot open /proc/self/pagemap: " + errno_text(errno) + kUseHash);
  }
  pm_scan_arg empty_range{};  // scans nothing; only asks whether the ioctl exists
  empty_range.size = sizeof empty_range;
  if (::ioctl(pagemap.get(), PAGEMAP_SCAN, &empty_range) < 0) {
    throw Unavailable("uffd: PAGEMAP_SCAN on /proc/self/pagemap failed: " + errno_text(errno) +
                      " (it needs Linux >= 6.7)" + kUseHash);
  }
  return pagemap;
}

bool parse_vma_header(const std::string& line, AddressRange& vma) {
  const char* const end = line.data() + line.size();
  AddressRange parsed;
  const auto [dash, begin_error] = std::from_chars(line.data(), end, parsed.begin, 16);
  if (begin_error != std::errc{} || dash == end || *dash != '-') return false;
  const auto [space, end_error] = std::from_chars(dash + 1, end, parsed.end, 16);
  if (end_error != std::errc{} || space == end || *space != ' ') return false;
  vma = parsed;
  return true;
}

// VmFlags (proc(5)) of memory whose writes this tracker could miss.
struct Refusal {
  const char* vm_flag;
  const char* reason;
};
constexpr std::array<Refusal, 4> kRefusals{{
    {"sh", "is a shared mapping: writes through its other mappings (another process, write(2) to its file) "
           "bypass the write protection of this process's page tables"},
    {"ht", "is hugetlb memory: PAGEMAP_SCAN cannot write-protect part of a huge page again"},
    {"pf", "is a PFN mapping: it has no page table entries to write-protect"},
    {"io", "is an I/O mapping: it has no page table entries to write-protect"},
}};

void refuse_flags(int id, AddressRange range, const std::string& vm_flags_line) {
  std::istringstream flags(vm_flags_line.substr(std::strlen("VmFlags:")));
  std::string flag;
  while (flags >> flag) {
    for (const Refusal& refusal : kRefusals) {
      if (flag == refusal.vm_flag) throw Unavailable(where(id, range) + " " + refusal.reason + kUseHash);
    }
  }
}

// Throws unless the mappings under `range` are all memory whose writes show
// in this process's page tables. /proc/self/smaps is read only up to the range.
void check_memory_kind(int id, AddressRange range) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) throw Unavailable(where(id, range) + ": cannot read /proc/self/smaps" + kUseHash);
  std::string line;
  AddressRange vma;
  std::uintptr_t mapped_to = range.begin;
  while (std::getline(smaps, line)) {
    if (parse_vma_header(line, vma)) {
      if (vma.begin >= range.end) break;
      continue;
    }
    if (line.rfind("VmFlags:", 0) != 0 || intersect(vma, range).empty()) continue;
    if (vma.begin > mapped_to) break;
    mapped_to = vma.end;
    refuse_flags(id, range, line);
  }
  if (mapped_to < range.end) throw InvalidArgumentError(where(id, range) + " is not all mapped memory");
}

// fork(): the tracker has no UFFD_FEATURE_EVENT_FORK, so the child's copies
// of the watched mappings are not registered and carry no write protection;
// the child's writes land in its own copy-on-write pages and never show here.
// The parent's page table entries keep their protection, and a parent's write
// to a page the child still shares resolves the copy-on-write and the
// protection in the same fault, so the parent's tracking goes on unchanged.
// The child must not use the tracker: its /proc/self/pagemap descriptor
// still reads the parent's address space.
class UffdTracker final : public Tracker {
 public:
  UffdTracker(FileDescriptor uffd, FileDescriptor pagemap) : uffd_(std::move(uffd)), pagemap_(std::move(pagemap)) {}

  // Closing the userfaultfd unregisters whatever is still watched.
  ~UffdTracker() override = default;

  Method method() const override { return Method::kUffd; }
  void watch(int id, std::byte* base, std::size_t bytes) override;
  void unwatch(int id) override;
  PageSet collect(int id, std::size_t block_pages) override;

 private:
  struct Region {
    AddressRange pages;
    bool collected = false;
    // Written pages of this region that a neighbour's collect() found (and
    // re-armed) on a page both regions touch; reported at this one's next.
    PageSet pending;
  };

  Region& find(int id);
  std::vector<AddressRange> pages_only_in(int id, AddressRange range) const;
  std::vector<Region*> neighbours_of(int id, AddressRange range);
  void arm(int id, AddressRange range);
  void register_range(int id, AddressRange range);
  void write_protect(int id, AddressRange range);
  void unregister_range(int id, AddressRange range);
  template <class Fn>
  void scan_and_rearm(int id, AddressRange range, Fn&& on_written_run);

  FileDescriptor uffd_;
  FileDescriptor pagemap_;
  std::map<int, Region> regions_;
};

void mark(PageSet& set, AddressRange region_pages, AddressRange written) {
  if (written.empty()) return;
  set.insert_range((written.begin - region_pages.begin) / page_size(), written.length() / page_size());
}

void UffdTracker::watch(int id, std::byte* base, std::size_t bytes) {
  if (base == nullptr || bytes == 0) {
    throw InvalidArgumentError("uffd: region " + std::to_string(id) + " is empty (null base or 0 bytes)");
  }
  if (regions_.count(id) != 0) {
    throw InvalidArgumentError("uffd: region " + std::to_string(id) + " is already watched");
  }
  const AddressRange pages = pages_of(base, bytes);
  check_memory_kind(id, pages);
  // Pages another region watches are registered and armed already; arming
  // them again would drop the writes that region has not collected yet.
  const std::vector<AddressRange> fresh = pages_only_in(id, pages);
  try {
    for (AddressRange range : fresh) arm(id, range);
  } catch (const Error&) {
    for (AddressRange range : fresh) {
      uffdio_range armed = as_uffdio_range(range);
      ::ioctl(uffd_.get(), UFFDIO_UNREGISTER, &armed);  // best effort: the first error is the one to report
    }
    throw;
  }
  regions_.emplace(id, Region{pages, false, PageSet(pages_spanned(base, bytes))});
}

void UffdTracker::unwatch(int id) {
  const auto found = regions_.find(id);
  if (found == regions_.end()) return;
  for (AddressRange range : pages_only_in(id, found->second.pages)) unregister_range(id, range);
  regions_.erase(found);
}

PageSet UffdTracker::collect(int id, std::size_t block_pages) {
  check_block_pages("uffd", id, block_pages);
  Region& region = find(id);
  const std::vector<Region*> neighbours = neighbours_of(id, region.pages);
  PageSet written(region.pages.length() / page_size());
  scan_and_rearm(id, region.pages, [&](AddressRange run) {
    mark(written, region.pages, run);
    for (Region* neighbour : neighbours) mark(neighbour->pending, neighbour->pages, intersect(run, neighbour->pages));
  });
  if (!region.collected) written.insert_range(0, written.pages());
  region.collected = true;
  region.pending.for_each_run([&](std::size_t first, std::size_t count) { written.insert_range(first, count); });
  region.pending = PageSet(written.pages());
  return written;
}

UffdTracker::Region& UffdTracker::find(int id) {
  const auto found = regions_.find(id);
  if (found == regions_.end()) throw InvalidArgumentError("uffd: region " + std::to_string(id) + " is not watched");
  return found->second;
}

// The parts of `range` that no watched region other than `id` touches.
std::vector<AddressRange> UffdTracker::pages_only_in(int id, AddressRange range) const {
  std::vector<AddressRange> shared;
  for (const auto& [other_id, other] : regions_) {
    const AddressRange overlap = intersect(other.pages, range);
    if (other_id != id && !overlap.empty()) shared.push_back(overlap);
  }
  std::sort(shared.begin(), shared.end(), [](AddressRange a, AddressRange b) { return a.begin < b.begin; });
  std::vector<AddressRange> alone;
  std::uintptr_t from = range.begin;
  for (AddressRange overlap : shared) {
    if (overlap.begin > from) alone.push_back({from, overlap.begin});
    from = std::max(from, overlap.end);
  }
  if (from < range.end) alone.push_back({from, range.end});
  return alone;
}

std::vector<UffdTracker::Region*> UffdTracker::neighbours_of(int id, AddressRange range) {
  std::vector<Region*> neighbours;
  for (auto& [other_id, other] : regions_) {
    if (other_id != id && !intersect(other.pages, range).empty()) neighbours.push_back(&other);
  }
  return neighbours;
}

void UffdTracker::arm(int id, AddressRange range) {
  register_range(id, range);
  write_protect(id, range);
}

void UffdTracker::register_range(int id, AddressRange range) {
  uffdio_register request{};
  request.range = as_uffdio_range(range);
  request.mode = UFFDIO_REGISTER_MODE_WP;
  if (::ioctl(uffd_.get(), UFFDIO_REGISTER, &request) != 0) {
    const int error = errno;
    const char* hint = error == EBUSY ? " (another userfaultfd, e.g. another tracker, has it)" : "";
    throw Unavailable(where(id, range) + ": UFFDIO_REGISTER failed: " + errno_text(error) + hint + kUseHash);
  }
  if ((request.ioctls & (std::uint64_t{1} << _UFFDIO_WRITEPROTECT)) == 0) {
    unregister_range(id, range);
    throw Unavailable(where(id, range) + ": this memory cannot be write-protected by userfaultfd" + kUseHash);
  }
}

void UffdTracker::write_protect(int id, AddressRange range) {
  uffdio_writeprotect request{};
  request.range = as_uffdio_range(range);
  request.mode = UFFDIO_WRITEPROTECT_MODE_WP;
  // EAGAIN: the address space was changing under the call; nothing was done.
  while (::ioctl(uffd_.get(), UFFDIO_WRITEPROTECT, &request) != 0) {
    if (errno != EAGAIN) throw StateError(where(id, range) + ": UFFDIO_WRITEPROTECT failed: " + errno_text(errno));
    ::sched_yield();
  }
}

// Also clears the pages' write protection (the kernel does so on unregister).
// EINVAL: nothing is mapped in the range any more (the application unmapped
// it before unwatch), so nothing is registered there either.
void UffdTracker::unregister_range(int id, AddressRange range) {
  uffdio_range request = as_uffdio_range(range);
  if (::ioctl(uffd_.get(), UFFDIO_UNREGISTER, &request) != 0 && errno != EINVAL) {
    throw StateError(where(id, range) + ": UFFDIO_UNREGISTER failed: " + errno_text(errno));
  }
}

// Calls on_written_run(run) for each run of pages of `range` written since it
// was last armed, and arms them again in the same ioctl. The output buffer
// may fill before the walk ends; the next call goes on from walk_end.
template <class Fn>
void UffdTracker::scan_and_rearm(int id, AddressRange range, Fn&& on_written_run) {
  std::array<page_region, 256> runs;
  pm_scan_arg scan{};
  scan.size = sizeof scan;
  // CHECK_WPASYNC fails the scan on memory no longer registered (unmapped
  // and mapped again since watch()) rather than report it unwritten.
  scan.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC;
  scan.start = range.begin;
  scan.end = range.end;
  scan.vec = reinterpret_cast<std::uintptr_t>(runs.data());
  scan.vec_len = runs.size();
  scan.category_mask = PAGE_IS_WRITTEN;
  scan.return_mask = PAGE_IS_WRITTEN;
  while (scan.start < scan.end) {
    const int found = ::ioctl(pagemap_.get(), PAGEMAP_SCAN, &scan);
    if (found < 0) {
      const int error = errno;
      const char* hint = error == EPERM ? " (was the memory unmapped or remapped since watch?)" : "";
      throw StateError(where(id, range) + ": PAGEMAP_SCAN failed: " + errno_text(error) + hint);
    }
    for (int i = 0; i < found; ++i) on_written_run(AddressRange{runs[i].start, runs[i].end});
    if (scan.walk_end <= scan.start) throw StateError(where(id, range) + ": PAGEMAP_SCAN made no progress");
    scan.start = scan.walk_end;
  }
}

}  // namespace

std::unique_ptr<Tracker> make_uffd_tracker() {
  // WP_UNPOPULATED write-protects pages never populated (with page table
  // markers), so no MADV_POPULATE_WRITE is needed first. Every kernel that
  // offers WP_ASYNC offers it and turns it on with WP_ASYNC (fs/userfaultfd.c:
  // "WP_ASYNC relies on WP_UNPOPULATED"); PM_SCAN_CHECK_WPASYNC needs it too.
  constexpr std::uint64_t kFeatures = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
  // A userfaultfd takes UFFDIO_API once, so a throwaway one asks which
  // features this kernel offers.
  if ((enable_api(open_userfaultfd(), 0) & kFeatures) != kFeatures) {
    throw Unavailable(std::string("uffd: this kernel lacks UFFD_FEATURE_WP_ASYNC (it needs Linux >= 6.7)") + kUseHash);
  }
  FileDescriptor uffd = open_userfaultfd();
  enable_api(uffd, kFeatures);
  return std::make_unique<UffdTracker>(std::move(uffd), open_pagemap());
}

}  // namespace resurgo::track
