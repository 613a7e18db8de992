# The heat2d programs compute the same bits (cmake -P): the C++ one and one
# other (Fortran: F90=path; Python: PYTHON=interpreter SCRIPT=heat2d.py) run
# the same problem with checkpoints in a fresh WORKDIR; fails unless their
# final fields are identical files.
#   cmake -DCPP=path (-DF90=path | -DPYTHON=path -DSCRIPT=path) -DWORKDIR=dir -P same_bytes.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/python_ready.cmake)
if(PYTHON)
  skip_unless_python_ready(${PYTHON})
  set(other ${PYTHON} ${SCRIPT} --nx 101 --ny 77 --steps 40 --every 10 --store other --output other.bin)
else()
  set(other ${F90} 101 77 40 10 other other.bin)
endif()
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/local")
set(ENV{RESURGO_PERSISTENT_PATH} "${WORKDIR}/persistent")
execute_process(
  COMMAND "${CPP}" --nx 101 --ny 77 --steps 40 --every 10 --store cpp --output cpp.bin
  COMMAND_ERROR_IS_FATAL ANY WORKING_DIRECTORY "${WORKDIR}")
execute_process(COMMAND ${other} COMMAND_ERROR_IS_FATAL ANY WORKING_DIRECTORY "${WORKDIR}")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files cpp.bin other.bin
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "heat2d in C++ and '${other}' ended with different fields in ${WORKDIR}")
endif()
