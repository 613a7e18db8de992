// A store's identity at open (format/store_id.h; docs/reliability.md,
// "Security"): the one its directories hold, or a new one when none does.
// Directories that hold different identities belong to different stores
// (a node-local directory left by another run under the same name): the
// store does not open, and the error names them.
#pragma once

#include "format/store_id.h"
#include "resurgo/comm.hpp"
#include "tier/route.h"

namespace resurgo {

// The identity a store opens with, and whether it was drawn because no
// directory held one (Route::set_identity).
struct ChosenIdentity {
  format::StoreId id;
  bool drawn = false;
};

// A process alone: from this rank's L2 and L4.
ChosenIdentity solo_identity(const std::string& store, Route& route);

// The ranks of a job: from every rank's L2 and L4 (all ranks share L4, each
// node has its own L2), or drawn by rank 0. Collective; `timeout_seconds`
// bounds the wait for the other ranks (mpi.timeout). A disagreement is a
// MismatchError on every rank.
ChosenIdentity collective_identity(const std::string& store, Route& route, Comm& comm, double timeout_seconds);

}  // namespace resurgo
