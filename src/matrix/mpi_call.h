// MPI return codes as exceptions. The matrix's communicator keeps MPI's
// default handler (errors abort the job), so these fire only where an
// application installed MPI_ERRORS_RETURN on the communicator it passed.
#pragma once

#include <mpi.h>

namespace resurgo {

// StateError naming the call and MPI's description of `status`.
void check_mpi(int status, const char* call);

template <typename T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}

}  // namespace resurgo
