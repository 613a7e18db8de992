// Background work that is the least urgent in the process (a copy to a
// level behind another that already holds the version; the MPI job's steps)
// runs at nice +10: on cores the application leaves idle, instead of taking
// turns with it; a contested core gives it about a tenth of the time. Best
// effort: on failure the thread keeps the normal priority. (Linux: a nice
// value per thread.)
#pragma once

namespace resurgo {

void lower_this_thread_priority();

}  // namespace resurgo
