#include "capture/fork_capture.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>

#include "base/clock.h"
#include "base/thread_pool.h"
#include "capture/mappings.h"
#include "format/version_writer.h"
#include "resurgo/errors.hpp"

namespace resurgo {

namespace {


std::atomic<ForkCapture::ForkFunction> fork_function{nullptr};


// Exit statuses of the child besides 0.
constexpr int kChildFailed = 1;      // an Error; its message is on the pipe
constexpr int kParentGone = 2;       // the parent died before the child started

// Private_Dirty of this process in bytes, from /proc/self/smaps_rollup (0
// when unavailable). In the child it grows by every page the parent writes
// while the child lives: the parent gets a new copy, and the original becomes
// the child's alone.
std::uint64_t private_dirty_bytes() {
  std::ifstream smaps("/proc/self/smaps_rollup");
  std::string key;
  std::uint64_t kib = 0;
  while (smaps >> key) {
    if (key == "Private_Dirty:" && smaps >> kib) return kib * 1024;
    smaps.ignore(1 << 20, '\n');
  }
  return 0;
}

void write_all(int fd, const void* data, std::size_t bytes) {
  const auto* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd, cursor, bytes);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // the parent is gone; nothing to tell
    cursor += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return text;
    text.append(buffer, static_cast<std::size_t>(got));
  }
}

// The child: writes the version to `level`, reports on `report_fd`, exits.
// Compression gets its own threads (started after the fork, so no lock of
// the parent's is involved); plain writes need none.
[[noreturn]] void run_child(pid_t parent, int report_fd, Level& level, const Snapshot& snapshot,
                            const Config& config) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a dead parent leaves only a temporary, removed at next open
  if (::getppid() != parent) ::_exit(kParentGone);
  int status = 0;
  // Started (the fork handlers have run): see ForkCapture::take. Sent first,
  // because the parent's checkpoint() waits for it.
  write_all(report_fd, "S", 1);
  try {
    const int helpers = config.pipeline.compress == Codec::kNone ? 0 : pipeline_thread_count(config) - 1;
    ThreadPool pool(helpers);
    WrittenVersion written;
    level.commit(static_cast<int>(snapshot.header.version), [&](WritableFile& file) {
      written.stored_bytes = write_extents(file, snapshot.header, snapshot.extents, config.pipeline, pool);
    });
    // Measured once, at the end: at fork every page was shared, so what the
    // writer holds alone now is what the application duplicated by writing,
    // plus the writer's own buffers (a few MiB at most). Reading
    // smaps_rollup walks the page tables, which checkpoint() must not wait for.
    written.copy_on_write_bytes = private_dirty_bytes();
    write_all(report_fd, &written, sizeof written);
  } catch (const std::exception& error) {
    write_all(report_fd, error.what(), std::strlen(error.what()));
    status = kChildFailed;
  }
  ::_exit(status);
}

// Leaves `ranges` out of any child forked while it lives (MADV_DONTFORK),
// and gives them to later forks again afterwards. A range the kernel
// refuses to advise stays shared with the child, which costs only
// copy-on-write faults. Never destroyed in the child, which exits.
class Withholding {
 public:
  explicit Withholding(const std::vector<ByteRange>& ranges) {
    for (const ByteRange& range : ranges) {
      if (::madvise(reinterpret_cast<void*>(range.begin), range.size(), MADV_DONTFORK) == 0) advised_.push_back(range);
    }
  }
  ~Withholding() {
    for (const ByteRange& range : advised_) ::madvise(reinterpret_cast<void*>(range.begin), range.size(), MADV_DOFORK);
  }
  Withholding(const Withholding&) = delete;
  Withholding& operator=(const Withholding&) = delete;

 private:
  std::vector<ByteRange> advised_;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + ::strsignal(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) == kParentGone) return "found its parent gone";
  return "exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace

// One forked writer: the parent's view. Reaped by the pipeline worker that
// waits for it (Snapshot::await_writer); the next capture waits until then.
struct ForkCapture::Child {
  pid_t pid = -1;
  int report_fd = -1;
  int version = 0;
  // Started before `reaped` is set, so that the next fork stops its pass.
  HugePageCollapser* collapser = nullptr;
  std::mutex mutex;
  std::condition_variable reaped_changed;
  bool reaped = false;

  WrittenVersion await() {
    const std::string report = read_all(report_fd);  // EOF when the child exits
    ::close(report_fd);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    collapser->start(version);
    {
      std::lock_guard lock(mutex);
      reaped = true;
    }
    reaped_changed.notify_all();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && report.size() == sizeof(WrittenVersion)) {
      WrittenVersion written;
      std::memcpy(&written, report.data(), sizeof written);
      return written;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kChildFailed) {
      throw StorageError("forked writer of version " + std::to_string(version) + ": " + report);
    }
    throw StorageError("forked writer of version " + std::to_string(version) + " (pid " + std::to_string(pid) +
                       ") " + describe_status(status) + "; the version was not committed");
  }

  void wait_reaped() {
    std::unique_lock lock(mutex);
    reaped_changed.wait(lock, [&] { return reaped; });
  }
};

void ForkCapture::set_fork_function_for_testing(ForkFunction function) { fork_function = function; }

ForkCapture::~ForkCapture() {
  if (in_flight_) in_flight_->wait_reaped();  // the Store drains before destroying its capture
}

void ForkCapture::wait_for_previous_child(CaptureTimes& times) {
  if (!in_flight_) return;
  const Clock::time_point started = Clock::now();
  in_flight_->wait_reaped();
  in_flight_.reset();
  times.backpressure_seconds += seconds_since(started);
}

void ForkCapture::resize(std::uint64_t) {
  checked_.clear();
  collapser_.forget_ranges();  // a region left may be unmapped next
}

// Once per protected set and choice of copied regions (/proc/self/smaps is
// slow), two facts of the mappings under the regions. Memory advised
// MADV_DONTFORK (by the application, or by a driver that registered it for
// DMA) is absent from the child, which would fault reading it: such regions
// are refused with a message instead, unless their bytes were copied (the
// child reads the copy; their advice is left as it is). (Pinned memory
// without DONTFORK is fine: since Linux 5.9 the kernel copies pinned pages
// into the child at fork.) The huge pages that transparent huge pages may
// back under the forked regions are what the collapser restores after each child.
void ForkCapture::check_regions(const std::vector<Region>& regions, const std::vector<bool>& copied) {
  std::vector<Checked> looking_at;
  for (std::size_t r = 0; r < regions.size(); ++r) {
    looking_at.push_back({regions[r].data, regions[r].bytes, r < copied.size() && copied[r]});
  }
  if (!checked_.empty() && looking_at == checked_) return;
  const HugePagePolicy policy = HugePagePolicy::of_this_process();
  std::vector<ByteRange> collapsible;
  advised_dontfork_.clear();
  for (const Mapping& mapping : mappings_of_this_process()) {
    for (const Checked& region : looking_at) {
      if (!mapping.overlaps(region.data, region.bytes)) continue;
      const std::string& label = regions[&region - looking_at.data()].label;
      // "dc": do not copy this mapping on fork (proc(5)).
      if (mapping.has_flag("dc") && region.copied) {
        advised_dontfork_.push_back(region.data);
        continue;
      }
      if (mapping.has_flag("dc")) {
        throw InvalidArgumentError("capture.mode = \"fork\": region '" + label +
                                   "' lies in memory advised MADV_DONTFORK (DMA-registered or excluded by the "
                                   "application), which a forked child cannot read; use capture.mode = \"copy\"");
      }
      if (region.copied) continue;
      if (const auto part = collapsible_part(mapping, policy, region.data, region.bytes)) collapsible.push_back(*part);
    }
  }
  collapser_.set_ranges(std::move(collapsible));
  checked_ = std::move(looking_at);
}

// The copied regions' memory, cut inward to whole huge pages (or pages
// without transparent huge pages): advising part of a huge page would split
// it. The few pages at the ends stay shared with the child. A copied region
// that overlaps a forked one stays shared whole: the child reads the latter.
std::vector<ByteRange> ForkCapture::withheld_ranges(const std::vector<Region>& regions,
                                                    const std::vector<bool>& copied) const {
  const std::uint64_t unit = huge_page_bytes() > 0 ? huge_page_bytes() : static_cast<std::uint64_t>(::getpagesize());
  const auto overlaps_forked = [&](const Region& region) {
    for (std::size_t f = 0; f < regions.size(); ++f) {
      const bool forked = f >= copied.size() || !copied[f];
      if (forked && regions[f].data < region.data + region.bytes && region.data < regions[f].data + regions[f].bytes) {
        return true;
      }
    }
    return false;
  };
  std::vector<ByteRange> ranges;
  for (std::size_t r = 0; r < regions.size() && r < copied.size(); ++r) {
    const Region& region = regions[r];
    const bool advised = std::find(advised_dontfork_.begin(), advised_dontfork_.end(),
                                   static_cast<void*>(region.data)) != advised_dontfork_.end();
    if (!copied[r] || advised || overlaps_forked(region)) continue;
    const auto first = reinterpret_cast<std::uintptr_t>(region.data);
    const std::uint64_t begin = (first + unit - 1) / unit * unit;
    const std::uint64_t end = (first + region.bytes) / unit * unit;
    if (begin < end) ranges.push_back({begin, end});
  }
  return ranges;
}

Snapshot ForkCapture::take(const std::vector<Region>& regions, format::Header header, Level& first_level,
                           CaptureTimes& times) {
  Snapshot snapshot;
  snapshot.header = std::move(header);
  snapshot.extents = whole_regions(regions);
  return fork_writer(regions, {}, std::move(snapshot), first_level, times);
}

Snapshot ForkCapture::fork_writer(const std::vector<Region>& regions, const std::vector<bool>& copied,
                                  Snapshot snapshot, Level& first_level, CaptureTimes& times) {
  wait_for_previous_child(times);
  check_regions(regions, copied);
  const int version = static_cast<int>(snapshot.header.version);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw StorageError("checkpoint " + std::to_string(version) + ": cannot create the pipe to a forked writer: " +
                       std::strerror(errno));
  }
  const Clock::time_point started = Clock::now();
  const pid_t parent = ::getpid();
  const ForkFunction replacement = fork_function.load();
  collapser_.request_stop();  // collapsing memory shared with the child would copy it
  pid_t pid = -1;
  int fork_error = 0;
  {
    const Withholding withholding(withheld_ranges(regions, copied));
    pid = replacement ? replacement() : ::fork();
    fork_error = errno;
    if (pid == 0) {
      ::close(pipe_fds[0]);
      run_child(parent, pipe_fds[1], first_level, snapshot, context_.config);
    }
  }
  if (pid > 0) {
    // Until the child runs, it holds every descriptor of this process,
    // the lock files of all its stores among them; its atfork handler
    // (posix_env.cpp) lets go of those. Waiting for its first byte means
    // that once checkpoint() returns, the writer holds no store's lock:
    // another store of the process can be closed and reopened at once.
    char first_byte = 0;
    while (::read(pipe_fds[0], &first_byte, 1) < 0 && errno == EINTR) {
    }
  }
  times.copy_seconds += seconds_since(started);
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    const std::string cause = std::strerror(fork_error);
    // The version fails in the background like any other write; the store keeps working.
    snapshot.await_writer = [version, cause]() -> WrittenVersion {
      throw StorageError("fork for checkpoint " + std::to_string(version) + " failed: " + cause +
                         " (not enough memory for the page tables, or a process limit); lower the "
                         "resident memory, or use capture.mode = \"copy\"");
    };
    return snapshot;
  }
  auto child = std::make_shared<Child>();
  child->pid = pid;
  child->report_fd = pipe_fds[0];
  child->version = version;
  child->collapser = &collapser_;
  in_flight_ = child;
  snapshot.await_writer = [child] { return child->await(); };
  return snapshot;
}

}  // namespace resurgo
