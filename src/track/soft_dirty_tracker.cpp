#include "track/soft_dirty_tracker.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace resurgo::track {

namespace {

// Other architectures have the bit on some kernels (s390, ppc64, riscv), but
// only x86_64 is tested.
#if defined(__x86_64__)
constexpr bool kArchitectureSupported = true;
#else
constexpr bool kArchitectureSupported = false;
#endif

constexpr const char* kNoSoftDirty =
    "soft-dirty: this kernel does not report soft-dirty bits (needs CONFIG_MEM_SOFT_DIRTY, "
    "x86_64); set track.method = uffd or hash";

std::string system_error(const char* what) {
  return std::string("soft-dirty: ") + what + ": " + std::strerror(errno);
}

// A descriptor closed on every path out.
class File {
 public:
  File(const char* path, int flags) : fd_(::open(path, flags | O_CLOEXEC)) {
    if (fd_ < 0) throw Unavailable(system_error(path) + "; set track.method = uffd or hash");
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// /proc/self, opened at each use: a descriptor of /proc/self names the process
// that opened it, so one kept open would read the parent's pages in a child
// forked by the fork capture.
class ProcSoftDirtyKernel final : public SoftDirtyKernel {
 public:
  void clear_all() override {
    File clear_refs("/proc/self/clear_refs", O_WRONLY);
    if (::write(clear_refs.fd(), "4", 1) != 1) {
      throw StateError(system_error("writing 4 to /proc/self/clear_refs"));
    }
  }

  // Bit 55 of each 64-bit entry (at offset page number * 8). A page never
  // touched since the clear is not present and reads 0 until written; a page
  // swapped out keeps its bit in the swap entry, and pagemap reports it there.
  void read(const std::byte* base, std::size_t bytes, PageSet& written) override {
    constexpr int kSoftDirtyBit = 55;
    File pagemap("/proc/self/pagemap", O_RDONLY);
    const std::uintptr_t first_page = reinterpret_cast<std::uintptr_t>(base) / page_size();
    const std::size_t pages = pages_spanned(base, bytes);
    std::array<std::uint64_t, 4096> entries;
    for (std::size_t done = 0; done < pages;) {
      const std::size_t wanted = std::min(entries.size(), pages - done);
      const ssize_t got = ::pread(pagemap.fd(), entries.data(), wanted * sizeof(std::uint64_t),
                                  static_cast<off_t>((first_page + done) * sizeof(std::uint64_t)));
      if (got < 0 && errno == EINTR) continue;
      if (got < static_cast<ssize_t>(sizeof(std::uint64_t))) {
        if (got >= 0) errno = EIO;
        throw StateError(system_error("reading /proc/self/pagemap"));
      }
      const std::size_t read_entries = static_cast<std::size_t>(got) / sizeof(std::uint64_t);
      for (std::size_t i = 0; i < read_entries; ++i) {
        if ((entries[i] >> kSoftDirtyBit) & 1) written.insert(done + i);
      }
      done += read_entries;
    }
  }
};

// One page of our own: touched, cleared, then written. The bit must be 0
// after the clear and 1 after the write; a kernel without
// CONFIG_MEM_SOFT_DIRTY accepts the clear and always reads 0.
void probe(SoftDirtyKernel& kernel) {
  if (!kArchitectureSupported) throw Unavailable(kNoSoftDirty);
  void* mapping =
      ::mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw StateError(system_error("mmap of the probe page"));
  auto* page = static_cast<volatile std::byte*>(mapping);
  const auto bit = [&] {
    PageSet written(1);
    kernel.read(static_cast<std::byte*>(mapping), 1, written);
    return written.contains(0);
  };
  page[0] = std::byte{1};
  kernel.clear_all();
  const bool clean_after_clear = !bit();
  page[0] = std::byte{2};
  const bool dirty_after_write = bit();
  ::munmap(mapping, page_size());
  if (!clean_after_clear || !dirty_after_write) throw Unavailable(kNoSoftDirty);
}

}  // namespace

// Every region watched by every tracker on this coordinator, with the pages
// found written at clears made for other regions and not yet collected.
class SoftDirtyCoordinator {
 public:
  explicit SoftDirtyCoordinator(std::shared_ptr<SoftDirtyKernel> kernel)
      : kernel_(std::move(kernel)) {}

  void watch(const void* tracker, int id, std::byte* base, std::size_t bytes) {
    if (base == nullptr || bytes == 0) {
      throw InvalidArgumentError("soft-dirty: watch of " + describe_region(id, base, bytes) +
                                 ": the region is empty");
    }
    std::lock_guard lock(mutex_);
    // Every page counts as written until the first collect.
    PageSet all(pages_spanned(base, bytes));
    all.insert_range(0, all.pages());
    if (!regions_.try_emplace({tracker, id}, Region{base, bytes, std::move(all)}).second) {
      throw InvalidArgumentError("soft-dirty: watch of " + describe_region(id, base, bytes) +
                                 ": region id " + std::to_string(id) + " is already watched");
    }
  }

  void unwatch(const void* tracker, int id) {
    std::lock_guard lock(mutex_);
    regions_.erase({tracker, id});
  }

  void unwatch_all(const void* tracker) {
    std::lock_guard lock(mutex_);
    std::erase_if(regions_, [&](const auto& entry) { return entry.first.first == tracker; });
  }

  PageSet collect(const void* tracker, int id) {
    std::lock_guard lock(mutex_);
    const auto found = regions_.find({tracker, id});
    if (found == regions_.end()) {
      throw InvalidArgumentError("soft-dirty: collect of region " + std::to_string(id) +
                                 ": this region id is not watched");
    }
    for (auto& [key, region] : regions_) kernel_->read(region.base, region.bytes, region.pending);
    kernel_->clear_all();
    Region& region = found->second;
    return std::exchange(region.pending, PageSet(region.pending.pages()));
  }

 private:
  struct Region {
    std::byte* base;
    std::size_t bytes;
    PageSet pending;
  };

  std::shared_ptr<SoftDirtyKernel> kernel_;
  std::mutex mutex_;
  std::map<std::pair<const void*, int>, Region> regions_;
};

namespace {

class SoftDirtyTracker final : public Tracker {
 public:
  explicit SoftDirtyTracker(std::shared_ptr<SoftDirtyCoordinator> coordinator)
      : coordinator_(std::move(coordinator)) {}
  ~SoftDirtyTracker() override { coordinator_->unwatch_all(this); }

  Method method() const override { return Method::kSoftDirty; }
  void watch(int id, std::byte* base, std::size_t bytes) override {
    coordinator_->watch(this, id, base, bytes);
  }
  // The memory was never changed: soft-dirty needs no protection.
  void unwatch(int id) override { coordinator_->unwatch(this, id); }
  PageSet collect(int id, std::size_t block_pages) override {
    check_block_pages("soft-dirty", id, block_pages);
    return coordinator_->collect(this, id);
  }

 private:
  std::shared_ptr<SoftDirtyCoordinator> coordinator_;
};

std::shared_ptr<SoftDirtyCoordinator> process_coordinator() {
  // A probe that throws leaves the static unset: the next call probes again.
  static const std::shared_ptr<SoftDirtyCoordinator> coordinator = [] {
    auto kernel = std::make_shared<ProcSoftDirtyKernel>();
    probe(*kernel);
    return make_soft_dirty_coordinator(std::move(kernel));
  }();
  return coordinator;
}

}  // namespace

std::unique_ptr<Tracker> make_soft_dirty_tracker() {
  return make_soft_dirty_tracker(process_coordinator());
}

std::shared_ptr<SoftDirtyCoordinator> make_soft_dirty_coordinator(
    std::shared_ptr<SoftDirtyKernel> kernel) {
  return std::make_shared<SoftDirtyCoordinator>(std::move(kernel));
}

std::unique_ptr<Tracker> make_soft_dirty_tracker(
    std::shared_ptr<SoftDirtyCoordinator> coordinator) {
  return std::make_unique<SoftDirtyTracker>(std::move(coordinator));
}

}  // namespace resurgo::track
