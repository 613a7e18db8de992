// Background work that is the least urgent in the process (a copy to a
// level behind another that already holds the version; the MPI job's steps)
// runs ten nice steps below the thread that starts it (at most 19): on cores
// the application leaves idle, instead of taking turns with it; a contested
// core gives it about a tenth of the time. Best effort: on failure the
// thread keeps its priority. (Linux: a nice value per thread.)
#pragma once

namespace resurgo {

void lower_this_thread_priority();

}  // namespace resurgo
