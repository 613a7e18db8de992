#include "pipeline/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

namespace resurgo {

namespace {
constexpr int kBackgroundNiceness = 10;
}

void lower_this_thread_priority() {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kBackgroundNiceness);
}

}  // namespace resurgo
