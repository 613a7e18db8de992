// What one rank of a test job of threads (thread_job.h) got from a
// restarted job's calls: latest(), restart(), a next checkpoint restarted
// again. Every rank makes every call, whatever failed before (attempt), so
// that the job stays in step and a failure fails the test instead of
// hanging it; the first error is kept.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "resurgo/errors.hpp"

namespace resurgo::testing {

struct JobRun {
  std::optional<int> latest = -1;  // -1: latest() did not answer
  int restored = -1;
  int restarted_again = -1;
  bool bytes_right = false;
  std::string error;

  void attempt(const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& failure) {
      if (error.empty()) error = failure.what();
    }
  }
};

}  // namespace resurgo::testing
