#include "matrix/mpi_call.h"

#include <string>

#include "resurgo/errors.hpp"

namespace resurgo {

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw StateError(std::string("ConvergentMatrix: ") + call +
                   " failed: " + std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace resurgo
