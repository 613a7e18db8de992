#include "base/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace resurgo {

namespace {
constexpr int kBackgroundNiceness = 10;
constexpr int kLowestPriority = 19;
}  // namespace

// Relative to the thread's own nice value, so that in a job started with
// `nice` the copy still runs ten steps below the application.
void lower_this_thread_priority() {
  const auto thread = static_cast<id_t>(::gettid());
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, thread);
  if (current == -1 && errno != 0) return;
  ::setpriority(PRIO_PROCESS, thread, std::min(current + kBackgroundNiceness, kLowestPriority));
}

void make_this_thread_batch() {
  const sched_param param{};  // SCHED_BATCH takes priority 0
  ::sched_setscheduler(0, SCHED_BATCH, &param);
}

}  // namespace resurgo
