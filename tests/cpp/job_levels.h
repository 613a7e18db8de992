// The levels of a test job of threads (thread_job.h): L2 per fake node
// (<dir>/node<n>), L4 shared (<dir>/l4), every version written to both and
// kept, no log.
#pragma once

#include <string>

#include "resurgo/config.hpp"

namespace resurgo::testing {

inline Config job_levels(const std::string& dir) {
  Config result;
  result.local.path = dir + "/node{node}";
  result.persistent.path = dir + "/l4";
  result.persistent.every = 1;
  result.local.keep = 0;  // every version
  result.persistent.keep = 0;
  result.log.level = LogLevel::kOff;
  return result;
}

}  // namespace resurgo::testing
