#include "matrix/polite_wait.h"

#include <algorithm>
#include <cstdio>

#include "matrix/backoff.h"
#include "matrix/mpi_call.h"

namespace resurgo {

namespace {

constexpr double kLongestLimit = 1e9;  // seconds (31 years): longer ones are as good as none, and fit the clock

}  // namespace

Deadline::Deadline(double seconds)
    : seconds_(seconds),
      end_(std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(seconds > 0 ? std::min(seconds, kLongestLimit) : 0))) {}

std::string Deadline::text() const {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", seconds_);
  return text;
}

bool Deadline::passed() const { return seconds_ > 0 && std::chrono::steady_clock::now() >= end_; }

bool wait_until(const std::function<bool()>& done, const std::function<bool()>& meanwhile, const Deadline& deadline) {
  Backoff backoff;
  while (!done()) {
    if (deadline.passed()) return false;
    if (meanwhile && meanwhile()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
  return true;
}

bool wait_politely(MPI_Request& request, const std::function<bool()>& meanwhile, const Deadline& deadline) {
  return wait_until(
      [&] {
        int done = 0;
        check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        return done != 0;
      },
      meanwhile, deadline);
}

void wait_all_politely(std::vector<MPI_Request>& requests, const std::function<bool()>& meanwhile) {
  wait_until(
      [&] {
        int done = 0;
        check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
                  "MPI_Testall");
        return done != 0;
      },
      meanwhile);
  requests.clear();
}

}  // namespace resurgo
