// Background work that is the least urgent in the process (a copy to a
// level behind another that already holds the version; the MPI job's steps)
// runs ten nice steps below the thread that starts it (at most 19): on cores
// the application leaves idle, instead of taking turns with it; a contested
// core gives it about a tenth of the time. Best effort: on failure the
// thread keeps its priority. (Linux: a nice value per thread.)
#pragma once

namespace resurgo {

void lower_this_thread_priority();

// Work that may wait for a scheduler tick but should keep a fair share of
// the CPU (SCHED_BATCH): a thread woken by the application does not take
// the application's core at once, as a normal thread woken on a core busy
// with it would, in the middle of the call that woke it; unlike SCHED_IDLE
// it is not starved on cores the application and the pipeline keep busy.
// Best effort: on failure the thread keeps its policy. (Linux: per thread.)
void make_this_thread_batch();

}  // namespace resurgo
