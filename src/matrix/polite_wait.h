// Waiting without spinning: MPI's blocking collectives busy-wait, which on
// a node running more ranks (and progress threads) than it has cores takes
// the core from the very ranks being waited for. Testing with a Backoff
// sleeps instead once a short spin did not do.
#pragma once

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace resurgo {

// A time limit, `seconds` from its construction; 0 (or less): none.
class Deadline {
 public:
  explicit Deadline(double seconds = 0);

  bool passed() const;
  double seconds() const { return seconds_; }
  // "0.3 s", for messages.
  std::string text() const;

 private:
  double seconds_;
  std::chrono::steady_clock::time_point end_;
};

// Until `done` (tested first), running `meanwhile` between tests (true when
// it did something: the next test comes without a pause); false when
// `deadline` passed first.
bool wait_until(const std::function<bool()>& done, const std::function<bool()>& meanwhile,
                const Deadline& deadline = Deadline());

// Until `request` completes (it is then MPI_REQUEST_NULL); false when
// `deadline` passed first (the request is still active). The messages
// backend applies arriving bins in `meanwhile`.
bool wait_politely(MPI_Request& request, const std::function<bool()>& meanwhile = {},
                   const Deadline& deadline = Deadline());

// Until every one of `requests` completed (then they are cleared), running
// `meanwhile` between tests: the slab exchanges take arriving messages
// there, which the ranks being waited for may be waiting on.
void wait_all_politely(std::vector<MPI_Request>& requests, const std::function<bool()>& meanwhile = {});

}  // namespace resurgo
