// The newest version every rank of a job holds: how the MPI store's
// restart (job/collective_versions) and the automatic runtime's
// (auto/agreement) agree on one version when the ranks hold different ones.
#pragma once

#include <vector>

#include "resurgo/comm.hpp"

namespace resurgo {

// The newest of `held` (this rank's versions, in any order) at or below
// `bound` that every rank of `comm` holds, or -1 when there is none.
// Collective: every rank calls it, each with its own versions. Each round
// lowers the bound to the newest version every rank holds at or below it,
// and it stops once no rank lowers it.
long newest_everywhere(Comm& comm, std::vector<long> held, long bound);

}  // namespace resurgo
