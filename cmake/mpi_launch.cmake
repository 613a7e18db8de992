# How the MPI tests start their ranks. resurgo_mpi_launcher(out N) sets `out`
# to the command that starts N ranks with the launcher FindMPI found (the
# program and its arguments follow, after MPIEXEC_POSTFLAGS).
# RESURGO_MPI_TEST_ENVIRONMENT lets Open MPI's mpirun start ranks as root
# (containers, CI) and more ranks than cores; other launchers ignore it.
set(RESURGO_MPI_TEST_ENVIRONMENT
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1)

function(resurgo_mpi_launcher out ranks)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${MPIEXEC_PREFLAGS} PARENT_SCOPE)
endfunction()
