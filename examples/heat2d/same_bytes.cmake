# The C++ and Fortran heat2d compute the same bits (cmake -P): both run the
# same problem, with checkpoints, in a fresh WORKDIR; fails unless their
# final fields are identical files.
#   cmake -DCPP=path -DF90=path -DWORKDIR=dir -P same_bytes.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/local")
set(ENV{RESURGO_PERSISTENT_PATH} "${WORKDIR}/persistent")
execute_process(
  COMMAND "${CPP}" --nx 101 --ny 77 --steps 40 --every 10 --store cpp --output cpp.bin
  COMMAND_ERROR_IS_FATAL ANY WORKING_DIRECTORY "${WORKDIR}")
execute_process(COMMAND "${F90}" 101 77 40 10 f90 f90.bin
  COMMAND_ERROR_IS_FATAL ANY WORKING_DIRECTORY "${WORKDIR}")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files cpp.bin f90.bin
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "C++ and Fortran heat2d ended with different fields in ${WORKDIR}")
endif()
