# Faults of the automatic runtime's agreement in an MPI job (issue 31,
# "Bad input and faults"; examples/auto/tealeaf_mpi.cpp), cmake -P: a run
# with --fault FAULT (rank 1 declares its datasets in another order, runs
# one loop more, or stalls past mpi.timeout before an exchange) must fail
# on every rank with an error matching EXPECT (and NAMED on some rank, the
# rank that stalled named by the others), and leave
# no version committed after the fault (none when NO_VERSION). A run
# without the fault in the same levels must then end as an uninterrupted
# run does (what the failed job left restores, bit for bit, or nothing).
#
#   cmake -DLAUNCH="mpiexec|-n|3" -DRANKS=3 -DPROGRAM=path -DWORKDIR=dir -DFAULT=datasets
#         -DEXPECT=regex [-DNAMED=regex] [-DNO_VERSION=ON] -P auto_fault.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../../examples/restart_check.cmake)
require_defined(LAUNCH RANKS PROGRAM WORKDIR FAULT EXPECT)
default_values(NO_VERSION=OFF)
string(REPLACE "|" ";" LAUNCH "${LAUNCH}")
set(run ${LAUNCH} ${PROGRAM} --steps 4 --checkpoint-every 1)

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")
set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/full/node{node}")
run_for_result(full "${WORKDIR}" ${run} --dump "${WORKDIR}/full")
field(full checksum full_checksum)

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/faulty/node{node}")
execute_process(COMMAND ${run} --fault ${FAULT}
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "fault ${FAULT}: exit ${rc}\n${out}${err}")
if(rc EQUAL 0 OR out MATCHES "RESULT ")
  message(FATAL_ERROR "fault ${FAULT}: the job finished")
endif()
math(EXPR last "${RANKS} - 1")
foreach(rank RANGE ${last})
  if(NOT err MATCHES "tealeaf_mpi: rank ${rank}: [^\n]*${EXPECT}")
    message(FATAL_ERROR "fault ${FAULT}: rank ${rank} did not fail with an error matching '${EXPECT}'")
  endif()
endforeach()
if(DEFINED NAMED AND NOT err MATCHES "${NAMED}")
  message(FATAL_ERROR "fault ${FAULT}: no rank failed with an error matching '${NAMED}'")
endif()
file(GLOB_RECURSE manifests "${WORKDIR}/faulty/*.job")
if(NO_VERSION AND manifests)
  message(FATAL_ERROR "fault ${FAULT}: versions were committed: ${manifests}")
endif()

run_for_result(after "${WORKDIR}" ${run} --dump "${WORKDIR}/after")
field(after checksum checksum)
if(NOT checksum STREQUAL full_checksum)
  message(FATAL_ERROR "after the fault: checksums differ: uninterrupted ${full_checksum}, resumed ${checksum}")
endif()
foreach(rank RANGE ${last})
  file(SIZE "${WORKDIR}/full.${rank}" bytes)
  expect_same_bytes("${WORKDIR}/full.${rank}" "${WORKDIR}/after.${rank}" ${bytes})
endforeach()
message(STATUS "fault ${FAULT}: every rank failed with the expected error; the next job ended as an "
               "uninterrupted one")
