// An allgather of one long per rank that a rank posts and then goes on,
// collecting the values later (issue 31 part 1: the automatic runtime's
// agreement off the application's thread). A thread of its own runs each
// posted gather on a duplicate of the job's communicator, so that its
// messages never match the application's (or the store's); the application
// waits only at collect(), for the ranks that have not posted yet.
//
// Only for a Comm whose threads_may_call() (MPI_THREAD_MULTIPLE): the
// thread calls it while the application calls MPI. Making one is collective
// (Comm::duplicate): every rank makes its PostedGather at the same point.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "resurgo/comm.hpp"

namespace resurgo::autockpt {

class PostedGather {
 public:
  // Each gather has `timeout_seconds` as deadline (Comm::allgather).
  PostedGather(Comm& comm, double timeout_seconds);
  // Runs the gather posted last to its end, if any, and drops its values:
  // the other ranks wait for this rank's value. Waits at most the timeout
  // for ranks that never post it (for ever with none, as Comm::allgather).
  ~PostedGather();
  PostedGather(const PostedGather&) = delete;
  PostedGather& operator=(const PostedGather&) = delete;

  // Starts the gather of `value`; one at a time: collect() the previous first.
  void post(long value);
  // Every rank's value of the posted gather, indexed by rank, once every rank
  // posted it; rethrows its error (StateError naming the ranks that did not
  // post within the timeout).
  std::vector<long> collect();

 private:
  void run();

  std::unique_ptr<Comm> comm_;
  double timeout_seconds_;
  bool pending_ = false;  // posted, not collected: the application thread's own view, no lock

  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<long> request_;  // posted, not started
  bool done_ = false;            // values_ or error_ holds the answer
  std::vector<long> values_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

}  // namespace resurgo::autockpt
