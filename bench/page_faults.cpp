// page_faults: runs a program and counts the page faults its process and
// threads take in user space from exec to exit (perf's software event
// PERF_COUNT_SW_PAGE_FAULTS, as `perf stat -e page-faults` counts it). Each
// first write to a block the mprotect tracker protected is one. Used by
// bench/granularity.py; a benchmark tool, never a test.
//
//   page_faults PROGRAM [ARGS...]
//
// The program's output passes through; then "page_faults N" on stderr. The
// exit status is the program's (128 + signal when a signal ended it), 70
// when the counter cannot be opened (kernel.perf_event_paranoid above 2).
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

constexpr int kNoCounter = 70;  // EX_SOFTWARE

// A counter of `pid`'s page faults and those of the threads it starts,
// enabled when it calls exec.
int open_fault_counter(pid_t pid) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.disabled = 1;
  attr.enable_on_exec = 1;
  attr.inherit = 1;
  attr.exclude_kernel = 1;  // what an unprivileged user may count
  attr.exclude_hv = 1;
  return static_cast<int>(::syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: page_faults PROGRAM [ARGS...]\n");
    return 64;
  }
  int go[2];
  if (::pipe(go) != 0) {
    std::perror("page_faults: pipe");
    return kNoCounter;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::perror("page_faults: fork");
    return kNoCounter;
  }
  if (child == 0) {  // waits until the counter is attached, then runs the program
    ::close(go[1]);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(kNoCounter);
    ::close(go[0]);
    ::execvp(argv[1], argv + 1);
    std::fprintf(stderr, "page_faults: cannot run %s: %s\n", argv[1], std::strerror(errno));
    ::_exit(127);
  }
  ::close(go[0]);
  const int counter = open_fault_counter(child);
  if (counter < 0) {
    std::fprintf(stderr, "page_faults: perf_event_open: %s (see kernel.perf_event_paranoid)\n",
                 std::strerror(errno));
  }
  if (counter >= 0 && ::write(go[1], "g", 1) != 1) std::perror("page_faults: pipe write");
  ::close(go[1]);  // without a counter, the child reads end of file and exits
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (counter < 0) return kNoCounter;
  std::uint64_t faults = 0;
  if (::read(counter, &faults, sizeof faults) != static_cast<ssize_t>(sizeof faults)) {
    std::perror("page_faults: reading the counter");
    return kNoCounter;
  }
  std::fprintf(stderr, "page_faults %llu\n", static_cast<unsigned long long>(faults));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
