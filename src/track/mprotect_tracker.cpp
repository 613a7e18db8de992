#include "track/mprotect_tracker.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace resurgo::track {
namespace {

// The table the SIGSEGV handler reads. A handler may take no lock and
// allocate nothing, so the table is a fixed array of slots made of lock-free
// atomics, never freed; a slot's state carries a generation (the bits above
// the two tag bits) that changes at every transition, so the handler can
// tell that a slot changed while it read it (a seqlock without writers'
// spinning). Writers (watch, unwatch, collect of every tracker) serialise on
// g_mutex.
//
// The dirty bitmap of a slot is allocated by watch() and freed by unwatch()
// only after the slot left the active state and no handler is inside it
// (`users`, taken by a handler before it revalidates the state).
using Bits = std::atomic<std::uint64_t>;

// The written-page bits of one region, in pages of their own (mmap), never
// in the heap: the signal handler sets them, and a heap page can be the
// first or last page of a watched region, which the tracker write-protects.
// The handler then faulted on its own bitmap (the crash campaign saw it,
// the regions being std::vectors).
class PageBits {
 public:
  explicit PageBits(std::size_t pages) : bytes_(std::max<std::size_t>((pages + 63) / 64, 1) * sizeof(Bits)) {
    void* memory = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::bad_alloc();
    words_ = new (memory) Bits[bytes_ / sizeof(Bits)]{};
  }
  ~PageBits() {
    if (words_ != nullptr) ::munmap(words_, bytes_);
  }
  PageBits(PageBits&& other) noexcept : words_(std::exchange(other.words_, nullptr)), bytes_(other.bytes_) {}
  PageBits& operator=(PageBits&&) = delete;
  PageBits(const PageBits&) = delete;
  PageBits& operator=(const PageBits&) = delete;

  Bits* get() const { return words_; }
  Bits& operator[](std::size_t word) const { return words_[word]; }

 private:
  Bits* words_ = nullptr;
  std::size_t bytes_;
};
static_assert(Bits::is_always_lock_free);
static_assert(std::atomic<std::size_t>::is_always_lock_free);

constexpr std::uint64_t kFree = 0;
constexpr std::uint64_t kActive = 1;
constexpr std::uint64_t kRetired = 2;
constexpr std::uint64_t kTagMask = 3;
constexpr std::size_t kSlotCapacity = 4096;

// A thread that faulted on a region just before unwatch() made it writable
// again may reach the handler after the slot was retired: the handler lets
// a write fault in a region unwatched this recently retry instead of passing
// it on. Short, because a fault there that is not ours (the memory was
// unmapped and mapped again read-only) spins until then before it is passed on.
constexpr std::int64_t kRetryAfterUnwatchNs = 100'000'000;

struct Slot {
  std::atomic<std::uint64_t> state{kFree};
  std::atomic<std::uintptr_t> first_page{0};
  std::atomic<std::size_t> pages{0};
  std::atomic<std::size_t> block_pages{1};
  std::atomic<Bits*> bits{nullptr};
  std::atomic<std::int64_t> retired_at_ns{0};
  std::atomic<std::uint32_t> users{0};
};

Slot g_slots[kSlotCapacity];
std::atomic<std::size_t> g_slots_used{0};    // slots at or past it were never used
std::atomic<std::size_t> g_page_size{4096};  // sysconf is not async-signal-safe
struct sigaction g_previous_action;
std::mutex g_mutex;
bool g_handler_installed = false;
// Under g_mutex: the handler was found replaced and every watched page was
// made writable; no page is protected again in this process.
bool g_protection_given_up = false;
std::size_t g_watched_pages = 0;  // of every watched region, under g_mutex

std::uint64_t next_state(std::uint64_t state, std::uint64_t tag) {
  return (((state >> 2) + 1) << 2) | tag;
}

std::int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// Pages [first, end), numbered from address 0.
struct PageRange {
  std::uintptr_t first = 0;
  std::uintptr_t end = 0;

  bool empty() const { return first >= end; }
  PageRange intersect(PageRange other) const {
    return {std::max(first, other.first), std::min(end, other.end)};
  }
  PageRange unite(PageRange other) const {
    return empty() ? other : PageRange{std::min(first, other.first), std::max(end, other.end)};
  }
};

PageRange range_of(const std::byte* base, std::size_t bytes) {
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(base) / page_size();
  return {first, first + pages_spanned(base, bytes)};
}

int change_protection(PageRange range, int protection) {
  const std::size_t size = g_page_size.load(std::memory_order_relaxed);
  return ::mprotect(reinterpret_cast<void*>(range.first * size), (range.end - range.first) * size,
                    protection);
}

bool test_bit(const Bits* bits, std::size_t index) {
  return (bits[index / 64].load() >> (index % 64)) & 1;
}

void set_bits(Bits* bits, std::size_t first, std::size_t end) {
  while (first < end) {
    const std::size_t offset = first % 64;
    const std::size_t count = std::min<std::size_t>(64 - offset, end - first);
    const std::uint64_t ones = count == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << count) - 1;
    bits[first / 64].fetch_or(ones << offset);
    first += count;
  }
}

// ---- The handler's side: async-signal-safe only (atomics, mprotect,
// clock_gettime, sigaction, raise).

// A slot as the handler read it, consistent: its state did not change while
// the fields were read. block_pages may change under it (collect); any value
// is safe because a fault marks exactly the pages it makes writable.
struct SlotView {
  std::uint64_t state = kFree;
  PageRange pages;
  std::size_t block_pages = 1;

  std::uint64_t tag() const { return state & kTagMask; }
  bool covers(std::uintptr_t page) const { return page >= pages.first && page < pages.end; }
  PageRange block_of(std::uintptr_t page) const {
    const std::uintptr_t first = pages.first + (page - pages.first) / block_pages * block_pages;
    return {first, std::min(first + block_pages, pages.end)};
  }
};

bool read_slot(const Slot& slot, SlotView& view) {
  view.state = slot.state.load(std::memory_order_acquire);
  if (view.tag() == kFree) return false;
  view.pages.first = slot.first_page.load(std::memory_order_relaxed);
  view.pages.end = view.pages.first + slot.pages.load(std::memory_order_relaxed);
  view.block_pages = slot.block_pages.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.state.load(std::memory_order_relaxed) == view.state;
}

// Marks `range` written in every active region that overlaps it.
void mark_written(PageRange range) {
  const std::size_t used = g_slots_used.load();
  for (std::size_t i = 0; i < used; ++i) {
    Slot& slot = g_slots[i];
    SlotView view;
    if (!read_slot(slot, view) || view.tag() != kActive) continue;
    const PageRange overlap = range.intersect(view.pages);
    if (overlap.empty()) continue;
    slot.users.fetch_add(1);
    if (slot.state.load() == view.state) {
      set_bits(slot.bits.load(), overlap.first - view.pages.first, overlap.end - view.pages.first);
    }
    slot.users.fetch_sub(1);
  }
}

// True when the write fault at `page` was ours and the write can be retried.
bool handle_write_fault(std::uintptr_t page) {
  PageRange blocks;
  bool recently_unwatched = false;
  const std::size_t used = g_slots_used.load();
  for (std::size_t i = 0; i < used; ++i) {
    SlotView view;
    if (!read_slot(g_slots[i], view) || !view.covers(page)) continue;
    if (view.tag() == kActive) {
      blocks = blocks.unite(view.block_of(page));
    } else if (monotonic_ns() - g_slots[i].retired_at_ns.load() < kRetryAfterUnwatchNs) {
      recently_unwatched = true;
    }
  }
  if (blocks.empty()) return recently_unwatched;
  // Marking before the pages become writable records a write another thread
  // makes through them at once; marking again after it restores the bits a
  // collect() may have taken in between, whose re-protection our mprotect
  // may have undone.
  mark_written(blocks);
  // mprotect is not on POSIX's list of async-signal-safe functions, but on
  // Linux it is a plain system call (no lock, no allocation in user space),
  // safe in a handler in practice; so is the rest of this path.
  if (change_protection(blocks, PROT_READ | PROT_WRITE) != 0) return false;
  mark_written(blocks);
  return true;
}

void pass_to_previous_handler(int signal, siginfo_t* info, void* context) {
  if (g_previous_action.sa_flags & SA_SIGINFO) {
    g_previous_action.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous_action.sa_handler != SIG_DFL && g_previous_action.sa_handler != SIG_IGN) {
    g_previous_action.sa_handler(signal);
    return;
  }
  // An ignored SIGSEGV sent by kill() or raise() stays ignored; a real fault
  // cannot be ignored (the kernel would force it), so it ends the process.
  if (g_previous_action.sa_handler == SIG_IGN && info->si_code <= 0) return;
  // No handler before ours: end the process as SIGSEGV would have. A fault
  // happens again when the instruction is retried; a signal sent by kill()
  // or raise() (si_code <= 0) must be raised again.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(SIGSEGV, &default_action, nullptr);
  if (info->si_code <= 0) ::raise(signal);
}

// Only a write to a page without write permission can be ours. On x86_64 the
// page fault's error code tells a write from an instruction fetch or from a
// read of a page the application protected itself, faults that making the
// page writable would never get past; elsewhere every SEGV_ACCERR is taken
// for a write.
bool is_write_to_protected_page(const siginfo_t* info, const void* context) {
  if (info->si_code != SEGV_ACCERR) return false;
#if defined(__x86_64__)
  constexpr greg_t kWriteAccess = 2;  // X86_PF_WRITE, arch/x86/include/asm/trap_pf.h
  return (static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & kWriteAccess) != 0;
#else
  (void)context;
  return true;
#endif
}

void on_segv(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const bool handled =
      is_write_to_protected_page(info, context) &&
      handle_write_fault(reinterpret_cast<std::uintptr_t>(info->si_addr) / g_page_size.load());
  errno = saved_errno;
  if (!handled) pass_to_previous_handler(signal, info, context);
}

// ---- The writers' side, under g_mutex.

bool handler_is_ours() {
  struct sigaction current {};
  ::sigaction(SIGSEGV, nullptr, &current);
  return (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_segv;
}

// The faults that record writes go to another handler now: every watched
// page of the process becomes writable and counts as written, so that no
// write faults into a handler that does not expect it and none is lost.
void give_up_protection() {
  g_protection_given_up = true;
  const std::size_t used = g_slots_used.load();
  for (std::size_t i = 0; i < used; ++i) {
    SlotView view;
    if (!read_slot(g_slots[i], view) || view.tag() != kActive) continue;
    change_protection(view.pages, PROT_READ | PROT_WRITE);
    set_bits(g_slots[i].bits.load(), 0, view.pages.end - view.pages.first);
  }
}

// Why the tracker cannot protect pages any more, or "" while its handler is
// in place.
std::string handler_replaced() {
  if (!g_protection_given_up && handler_is_ours()) return "";
  if (!g_protection_given_up) give_up_protection();
  return "mprotect: the tracker's SIGSEGV handler was replaced (by the application or a library it loaded), so "
         "writes to protected pages no longer reach it; every watched page was made writable again";
}

// Scattered faults can split each watched page into a mapping of its own.
// The process keeps the mappings it holds now and half the limit for those
// it maps later; the watched pages of every tracker share the rest.
void check_mapping_budget(const MappingCount& mappings, std::size_t pages, const std::string& region) {
  const std::size_t kept = mappings.in_use + mappings.limit / 2;
  const std::size_t budget = mappings.limit > kept ? mappings.limit - kept : 0;
  if (g_watched_pages + pages <= budget) return;
  throw Unavailable("mprotect: cannot watch " + region + ": " + std::to_string(g_watched_pages + pages) +
                    " watched pages could split into as many mappings, more than the " + std::to_string(budget) +
                    " that vm.max_map_count (" + std::to_string(mappings.limit) + ") leaves beside the " +
                    std::to_string(mappings.in_use) +
                    " mappings the process holds and half the limit kept for those it maps later; set "
                    "track.method = uffd or hash");
}

void install_handler() {
  if (g_handler_installed) return;
  g_page_size.store(page_size());
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  // SA_ONSTACK: a stack overflow reaches the previous handler on the
  // alternate stack it may have set up for it.
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGSEGV, &action, &g_previous_action) != 0) {
    throw Unavailable(std::string("mprotect: cannot install the SIGSEGV handler: ") +
                      std::strerror(errno) + "; set track.method = uffd, soft-dirty or hash");
  }
  g_handler_installed = true;
}

Slot* claim_slot() {
  const std::size_t used = g_slots_used.load();
  const std::int64_t now = monotonic_ns();
  for (std::size_t i = 0; i < used; ++i) {
    const std::uint64_t tag = g_slots[i].state.load() & kTagMask;
    if (tag == kFree ||
        (tag == kRetired && now - g_slots[i].retired_at_ns.load() >= kRetryAfterUnwatchNs)) {
      return &g_slots[i];
    }
  }
  if (used == kSlotCapacity) return nullptr;
  g_slots_used.store(used + 1);
  return &g_slots[used];
}

void publish(Slot& slot, PageRange pages, Bits* bits) {
  // Free under a new generation first, so a handler that read the slot's
  // retired fields sees it change.
  slot.state.store(next_state(slot.state.load(), kFree));
  slot.first_page.store(pages.first, std::memory_order_relaxed);
  slot.pages.store(pages.end - pages.first, std::memory_order_relaxed);
  slot.block_pages.store(1, std::memory_order_relaxed);
  slot.bits.store(bits, std::memory_order_relaxed);
  slot.state.store(next_state(slot.state.load(), kActive), std::memory_order_release);
}

// Takes `slot` out of the handler's view and waits until no handler uses its
// bitmap.
void retire(Slot& slot) {
  slot.retired_at_ns.store(monotonic_ns());
  slot.state.store(next_state(slot.state.load(), kRetired));
  while (slot.users.load() != 0) sched_yield();
}

// The runs of `range` that no other active region keeps write-protected
// (a page another region protects has its bit clear there): the pages that
// may be made writable without hiding that region's next write.
std::vector<PageRange> pages_free_of_other_regions(const Slot* self, PageRange range) {
  std::vector<std::uintptr_t> held;
  const std::size_t used = g_slots_used.load();
  for (std::size_t i = 0; i < used; ++i) {
    const Slot& other = g_slots[i];
    SlotView view;
    if (&other == self || !read_slot(other, view) || view.tag() != kActive) continue;
    const PageRange overlap = range.intersect(view.pages);
    for (std::uintptr_t page = overlap.first; page < overlap.end; ++page) {
      if (!test_bit(other.bits.load(), page - view.pages.first)) held.push_back(page);
    }
  }
  std::sort(held.begin(), held.end());
  std::vector<PageRange> runs;
  std::uintptr_t next = range.first;
  for (std::uintptr_t page : held) {
    if (page > next) runs.push_back({next, page});
    next = std::max(next, page + 1);
  }
  if (next < range.end) runs.push_back({next, range.end});
  return runs;
}

// Makes the pages of `range` that no other region protects writable; the
// errno of the first failure, 0 if none.
int make_writable(const Slot* self, PageRange range) {
  for (PageRange run : pages_free_of_other_regions(self, range)) {
    if (change_protection(run, PROT_READ | PROT_WRITE) != 0) return errno;
  }
  return 0;
}

class MprotectTracker final : public Tracker {
 public:
  explicit MprotectTracker(std::function<MappingCount()> mappings) : mappings_(std::move(mappings)) {}
  MprotectTracker(const MprotectTracker&) = delete;
  MprotectTracker& operator=(const MprotectTracker&) = delete;
  ~MprotectTracker() override;

  Method method() const override { return Method::kMprotect; }
  void watch(int id, std::byte* base, std::size_t bytes) override;
  void unwatch(int id) override;
  PageSet collect(int id, std::size_t block_pages) override;

 private:
  struct Region {
    Slot* slot;
    const std::byte* base;
    std::size_t bytes;
    PageRange pages;
    PageBits bits;
  };

  Region& find(int id);
  PageSet take_written(Region& region);

  std::function<MappingCount()> mappings_;
  std::map<int, Region> regions_;
};

MprotectTracker::~MprotectTracker() {
  while (!regions_.empty()) {
    try {
      unwatch(regions_.begin()->first);
    } catch (const Error&) {
      // The region is forgotten all the same; a destructor cannot report.
    }
  }
}

void MprotectTracker::watch(int id, std::byte* base, std::size_t bytes) {
  if (base == nullptr || bytes == 0) {
    throw InvalidArgumentError("mprotect: watch of region " + std::to_string(id) +
                               " needs a non-empty range");
  }
  std::lock_guard lock(g_mutex);
  if (regions_.contains(id)) {
    throw InvalidArgumentError("mprotect: " + describe_region(id, base, bytes) +
                               " is already watched; unwatch it first");
  }
  if (const std::string replaced = handler_replaced(); !replaced.empty()) {
    throw Unavailable(replaced + "; cannot watch " + describe_region(id, base, bytes));
  }
  const PageRange pages = range_of(base, bytes);
  if (int error = make_writable(nullptr, pages); error != 0) {
    throw Unavailable("mprotect: " + describe_region(id, base, bytes) +
                      " cannot be write-protected page by page (mprotect: " + std::strerror(error) +
                      "; hugetlbfs, read-only or unmapped memory?); set track.method = hash");
  }
  const std::size_t page_count = pages.end - pages.first;
  check_mapping_budget(mappings_(), page_count, describe_region(id, base, bytes));
  Slot* slot = claim_slot();
  if (slot == nullptr) {
    throw Unavailable("mprotect: cannot watch " + describe_region(id, base, bytes) + ": " +
                      std::to_string(kSlotCapacity) +
                      " regions are watched already in this process; set track.method = uffd, "
                      "soft-dirty or hash");
  }
  PageBits bits(page_count);
  set_bits(bits.get(), 0, page_count);  // every page counts as written until the first collect
  publish(*slot, pages, bits.get());
  regions_.emplace(id, Region{slot, base, bytes, pages, std::move(bits)});
  g_watched_pages += page_count;
}

void MprotectTracker::unwatch(int id) {
  std::lock_guard lock(g_mutex);
  auto found = regions_.find(id);
  if (found == regions_.end()) return;
  Region& region = found->second;
  const int error = make_writable(region.slot, region.pages);
  retire(*region.slot);
  g_watched_pages -= region.pages.end - region.pages.first;
  const std::string name = describe_region(id, region.base, region.bytes);
  regions_.erase(found);
  // ENOMEM: the memory was unmapped already; there is nothing to give back.
  if (error != 0 && error != ENOMEM) {
    throw StateError("mprotect: could not make " + name +
                     " writable again: " + std::strerror(error));
  }
}

PageSet MprotectTracker::collect(int id, std::size_t block_pages) {
  check_block_pages("mprotect", id, block_pages);
  std::lock_guard lock(g_mutex);
  Region& region = find(id);
  if (const std::string replaced = handler_replaced(); !replaced.empty()) {
    throw MethodLost(replaced + " (at the collect of " + describe_region(id, region.base, region.bytes) + ")");
  }
  // Taking the bits before protecting the pages: a write in between is
  // reported now, and the version copies it after collect returns.
  PageSet written = take_written(region);
  region.slot->block_pages.store(block_pages);
  if (change_protection(region.pages, PROT_READ) != 0) {
    const int error = errno;
    set_bits(region.bits.get(), 0, written.pages());  // unprotected: the next collect reports all
    throw Unavailable("mprotect: cannot write-protect " + describe_region(id, region.base, region.bytes) +
                      ": " + std::strerror(error) + " (was it unmapped while watched?)");
  }
  return written;
}

MprotectTracker::Region& MprotectTracker::find(int id) {
  auto found = regions_.find(id);
  if (found == regions_.end()) {
    throw InvalidArgumentError("mprotect: region " + std::to_string(id) + " is not watched");
  }
  return found->second;
}

PageSet MprotectTracker::take_written(Region& region) {
  PageSet written(region.pages.end - region.pages.first);
  for (std::size_t word = 0; word * 64 < written.pages(); ++word) {
    std::uint64_t taken = region.bits[word].exchange(0);
    while (taken != 0) {
      written.insert(word * 64 + static_cast<std::size_t>(std::countr_zero(taken)));
      taken &= taken - 1;
    }
  }
  return written;
}

}  // namespace

MappingCount count_mappings() {
  MappingCount count;  // the kernel's default limit, if /proc says nothing
  std::ifstream("/proc/sys/vm/max_map_count") >> count.limit;
  std::ifstream maps("/proc/self/maps");
  count.in_use = static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(maps), {}, '\n'));
  return count;
}

std::unique_ptr<Tracker> make_mprotect_tracker(std::function<MappingCount()> mappings) {
  std::lock_guard lock(g_mutex);
  install_handler();
  return std::make_unique<MprotectTracker>(std::move(mappings));
}

}  // namespace resurgo::track
