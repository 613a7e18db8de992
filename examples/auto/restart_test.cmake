# Restart test of an automatic-checkpointing mini-app (cmake -P). Runs, in
# WORKDIR, with the command line of harness.h:
#   full:    the whole run, uninterrupted;
#   killed:  the same run with a checkpoint requested in step CHECKPOINT_STEP,
#            which kills itself by SIGKILL at the top of step KILL_STEP once
#            the checkpoint is durable (IN_MEMORY: the store keeps it in
#            memory and the run dies by SIGTERM, which flushes it to L2);
#   resumed: the killed command again without the kill, which must restore
#            (replay, or fast-forward) and finish the run.
# Fails unless resumed ends with exactly the bytes and checksum of full.
#
#   cmake -DPROGRAM=path -DMODE=noinfo|initphase|fastfw|datlist|trigger -DWORKDIR=dir
#         [-DIN_MEMORY=ON] [-DSIZE= -DSTEPS= -DCHECKPOINT_STEP= -DKILL_STEP=] -P restart_test.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../restart_check.cmake)
require_defined(PROGRAM MODE WORKDIR)
# Enough steps for mode noinfo, whose checkpointing region only closes at the
# runtime's timeout (1000 loops, 25 CloverLeaf steps of 40 loops: datasets
# written at initialisation are never met again); the kill then comes at the
# top of the next step.
default_values(SIZE=48 STEPS=40 CHECKPOINT_STEP=3 KILL_STEP=5 IN_MEMORY=OFF)

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")

set(run "${PROGRAM}" --mode ${MODE} --size ${SIZE} --steps ${STEPS} --store auto)
set(interrupted ${run} --dir "${WORKDIR}/interrupted" --checkpoint-step ${CHECKPOINT_STEP}
                --dump "${WORKDIR}/resumed.bin")
if(IN_MEMORY)
  list(APPEND interrupted --in-memory)
  set(death --term-step ${KILL_STEP})
  set(expected_death "Subprocess terminated")  # execute_process's words for SIGTERM
else()
  set(death --kill-step ${KILL_STEP})
  set(expected_death "Subprocess killed")  # and for SIGKILL
endif()

# Fails unless run `tag` has the JSON field `key` (when `wanted`) or has not.
function(expect_key tag key wanted)
  string(JSON value ERROR_VARIABLE missing GET "${RESULT_${tag}}" ${key})
  if(wanted AND missing)
    message(FATAL_ERROR "${tag}: the RESULT line has no \"${key}\":\n${RESULT_${tag}}")
  elseif(NOT wanted AND NOT missing)
    message(FATAL_ERROR "${tag}: the RESULT line has \"${key}\": ${value}")
  endif()
endfunction()

run_for_result(full "${WORKDIR}" ${run} --dir "${WORKDIR}/full" --dump "${WORKDIR}/full.bin")
expect_key(full restore FALSE)
expect(full steps ${STEPS})

execute_process(COMMAND ${interrupted} ${death}
  WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "killed: exit ${rc}\n${out}${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "killed: finished without dying: no checkpoint was completed before the last step")
elseif(NOT rc STREQUAL expected_death)
  message(FATAL_ERROR "killed: ended with '${rc}', expected '${expected_death}'")
endif()
if(out MATCHES "RESULT ")
  message(FATAL_ERROR "killed: printed a RESULT line before dying")
endif()

run_for_result(resumed "${WORKDIR}" ${interrupted})
expect_key(resumed restore TRUE)
string(JSON version GET "${RESULT_resumed}" restore version)
string(JSON skipped GET "${RESULT_resumed}" restore skipped_loops)
string(JSON fast_forward GET "${RESULT_resumed}" restore fast_forward)
if(version LESS 0)
  message(FATAL_ERROR "resumed: restored version ${version}")
endif()
if(skipped EQUAL 0 AND NOT fast_forward)
  message(FATAL_ERROR "resumed: restored without skipping a loop: it ran the whole computation again")
endif()

field(full checksum full_checksum)
field(resumed checksum resumed_checksum)
if(NOT full_checksum STREQUAL resumed_checksum)
  message(FATAL_ERROR "checksums differ: uninterrupted ${full_checksum}, resumed ${resumed_checksum}")
endif()
field(full all_dataset_bytes bytes)
expect_same_bytes("${WORKDIR}/full.bin" "${WORKDIR}/resumed.bin" ${bytes})
message(STATUS "identical datasets (checksum ${full_checksum}) after restoring version ${version}")
