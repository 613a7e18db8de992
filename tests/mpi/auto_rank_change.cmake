# Restart of the automatic runtime on another rank count (issue 31 part 3;
# examples/auto/heat_blocks_mpi.cpp, whose fields are blocks of global
# arrays), cmake -P. In WORKDIR, with one directory of levels per run (L2
# per fake node, L4 shared by the job):
#   full:     the run uninterrupted on 4 ranks;
#   stopped:  the run on 4 ranks with a checkpoint requested every 2 steps,
#             killed at step 5 once a version is on L4: the job must fail;
#   on2, on3: copies of what stopped left, resumed on 2 and on 3 ranks: each
#             must restore a version written by 4 ranks and end with full's
#             checksum and global field, bit for bit;
#   overlap:  another copy resumed on 3 ranks whose last rank declares its
#             block a row early: every rank must refuse at the restore,
#             naming the dataset and the overlap, and no version is added;
#   gap:      a run from scratch on 4 ranks whose last rank declares its
#             block a row short: every rank must refuse the first checkpoint,
#             naming the dataset and the element in no block, and no version
#             is written.
#
# REFUSALS=OFF skips overlap and gap (one mode runs them: they do not
# depend on it).
#
#   cmake -DLAUNCH2="mpiexec|-n|2" -DLAUNCH3=... -DLAUNCH4=... -DPROGRAM=path -DWORKDIR=dir
#         -DMODE=initphase|fastfw [-DREFUSALS=OFF] -P auto_rank_change.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../../examples/restart_check.cmake)
require_defined(LAUNCH2 LAUNCH3 LAUNCH4 PROGRAM WORKDIR MODE)
default_values(REFUSALS=ON)
foreach(ranks 2 3 4)
  string(REPLACE "|" ";" LAUNCH${ranks} "${LAUNCH${ranks}}")
endforeach()
set(app ${PROGRAM} --mode ${MODE} --steps 12)
set(interrupted ${app} --checkpoint-every 2)

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")

# The levels of run `tag`.
function(use_levels tag)
  set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/${tag}/node{node}")
  set(ENV{RESURGO_PERSISTENT_PATH} "${WORKDIR}/${tag}/l4")
endfunction()

# Runs ARGN as `tag`, which must fail on every one of `ranks` ranks with an
# error matching `expected`; sets ERR_<tag>.
function(expect_refusal tag ranks expected)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message(STATUS "${tag}: exit ${rc}\n${out}${err}")
  if(rc EQUAL 0 OR out MATCHES "RESULT ")
    message(FATAL_ERROR "${tag}: the job was to be refused but finished")
  endif()
  math(EXPR last "${ranks} - 1")
  foreach(rank RANGE ${last})
    if(NOT err MATCHES "heat_blocks_mpi: rank ${rank}: [^\n]*${expected}")
      message(FATAL_ERROR "${tag}: rank ${rank} did not fail with an error matching '${expected}'")
    endif()
  endforeach()
endfunction()

use_levels(full)
run_for_result(full "${WORKDIR}" ${LAUNCH4} ${app} --dump "${WORKDIR}/full.bin")
field(full checksum full_checksum)
file(SIZE "${WORKDIR}/full.bin" field_bytes)

use_levels(stopped)
execute_process(COMMAND ${LAUNCH4} ${interrupted} --stop-step 5
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "stopped: exit ${rc}\n${out}${err}")
if(rc EQUAL 0 OR out MATCHES "RESULT ")
  message(FATAL_ERROR "stopped: the job was to die at step 5 but finished")
endif()
file(GLOB written "${WORKDIR}/stopped/l4/heat_blocks_mpi/*.job")
foreach(tag on2 on3 overlap)
  file(COPY "${WORKDIR}/stopped/" DESTINATION "${WORKDIR}/${tag}")
endforeach()

foreach(ranks 2 3)
  use_levels(on${ranks})
  run_for_result(on${ranks} "${WORKDIR}" ${LAUNCH${ranks}} ${interrupted} --dump "${WORKDIR}/on${ranks}.bin")
  string(JSON written_by ERROR_VARIABLE none GET "${RESULT_on${ranks}}" restore ranks)
  if(none OR NOT written_by EQUAL 4)
    message(FATAL_ERROR "on${ranks}: the run did not restore a version written by 4 ranks (${RESULT_on${ranks}})")
  endif()
  field(on${ranks} checksum checksum)
  if(NOT checksum STREQUAL full_checksum)
    message(FATAL_ERROR "on${ranks}: checksums differ: uninterrupted ${full_checksum}, resumed ${checksum}")
  endif()
  expect_same_bytes("${WORKDIR}/full.bin" "${WORKDIR}/on${ranks}.bin" ${field_bytes})
endforeach()

if(NOT REFUSALS)
  message(STATUS "${MODE}: a checkpoint of 4 ranks resumed on 2 and on 3 ranks ended as the uninterrupted run "
                 "(checksum ${full_checksum})")
  return()
endif()

use_levels(overlap)
expect_refusal(overlap 3 "restore of version [0-9]+ on store 'heat_blocks_mpi': the ranks' blocks do not tile the global arrays: dataset 'u' .global shape 48x32.: rank 1's block .16, 32. x .0, 32. and rank 2's block .31, 47. x .0, 32. overlap in .31, 32. x .0, 32.; [^\n]*nothing was written"
               ${LAUNCH3} ${interrupted} --blocks overlap)
file(GLOB after "${WORKDIR}/overlap/l4/heat_blocks_mpi/*.job")
list(TRANSFORM written REPLACE "/stopped/" "/overlap/")
if(NOT after STREQUAL written)
  message(FATAL_ERROR "overlap: the refused job changed the versions: before ${written}, after ${after}")
endif()

use_levels(gap)
expect_refusal(gap 4 "automatic checkpoint before loop [0-9]+ on store 'heat_blocks_mpi': the ranks' blocks do not tile the global arrays: dataset 'u' .global shape 48x32.: the 4 ranks' blocks hold 1504 of its 1536 elements, leaving a gap: element .47, 0. is in no rank's block; [^\n]*nothing was written"
               ${LAUNCH4} ${interrupted} --blocks gap)
file(GLOB_RECURSE versions "${WORKDIR}/gap/*.rsg" "${WORKDIR}/gap/*.job")
if(versions)
  message(FATAL_ERROR "gap: the refused checkpoint wrote files: ${versions}")
endif()
message(STATUS "${MODE}: a checkpoint of 4 ranks resumed on 2 and on 3 ranks ended as the uninterrupted run "
               "(checksum ${full_checksum}); an overlapping and a gapped decomposition were refused")
