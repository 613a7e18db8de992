// Completing a non-blocking collective without spinning: MPI's blocking
// collectives busy-wait, which on a node running more ranks (and progress
// threads) than it has cores takes the core from the very ranks being
// waited for. Testing with a Backoff sleeps instead once a short spin did
// not do.
#pragma once

#include <mpi.h>

#include <functional>

namespace resurgo {

// Until `request` completes. `meanwhile` (true when it did something) runs
// between tests: the messages backend applies arriving bins there.
void wait_politely(MPI_Request& request, const std::function<bool()>& meanwhile = {});

}  // namespace resurgo
