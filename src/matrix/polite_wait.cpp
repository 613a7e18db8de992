#include "matrix/polite_wait.h"

#include "matrix/backoff.h"
#include "matrix/mpi_call.h"

namespace resurgo {

void wait_politely(MPI_Request& request, const std::function<bool()>& meanwhile) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (meanwhile && meanwhile()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace resurgo
