# Restart test of the jacobi_heat example (cmake -P). Runs, each with its own
# store under WORKDIR:
#   full:    the whole run, uninterrupted, no checkpoint;
#   killed:  the same run with a checkpoint asked for in step CHECKPOINT_STEP,
#            which kills itself by SIGKILL at the top of step KILL_STEP (or
#            the first later one where the checkpoint was taken) once the
#            checkpoint is durable at L2;
#   resumed: the killed command again without the kill, which must restore
#            (replay, or fast-forward at fastfw/datlist) and finish the run.
# Fails unless resumed ends with exactly the bytes (u and total heat) of full.
#
#   cmake -DPROGRAM=path -DMODE=initphase|fastfw|datlist -DWORKDIR=dir
#         [-DNX= -DNY= -DSTEPS= -DCHECKPOINT_STEP= -DKILL_STEP=] -P restart_test.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../restart_check.cmake)
require_defined(PROGRAM MODE WORKDIR)
default_values(NX=48 NY=40 STEPS=10 CHECKPOINT_STEP=3 KILL_STEP=5)

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}/full" "${WORKDIR}/interrupted")
set(ENV{RESURGO_PERSISTENT_EVERY} 0)  # L2 only: nothing goes to ./checkpoints

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/full/local")
run_for_result(full "${WORKDIR}/full" "${PROGRAM}" ${MODE} ${NX} ${NY} ${STEPS} -1 -1 "${WORKDIR}/full.bin")
expect(full restored_from -1)

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/interrupted/local")
set(run "${PROGRAM}" ${MODE} ${NX} ${NY} ${STEPS} ${CHECKPOINT_STEP})
execute_process(COMMAND ${run} ${KILL_STEP} "${WORKDIR}/killed.bin"
  WORKING_DIRECTORY "${WORKDIR}/interrupted" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "killed: exit ${rc}\n${out}${err}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "killed: finished without dying: no checkpoint was taken before the last step")
elseif(NOT rc STREQUAL "Subprocess killed")
  message(FATAL_ERROR "killed: ended with '${rc}', expected 'Subprocess killed'")
endif()
if(out MATCHES "RESULT " OR EXISTS "${WORKDIR}/killed.bin")
  message(FATAL_ERROR "killed: reached the end of the run before dying")
endif()

run_for_result(resumed "${WORKDIR}/interrupted" ${run} -1 "${WORKDIR}/resumed.bin")
field(resumed restored_from version)
field(resumed skipped_loops skipped)
field(resumed fast_forward fast_forward)
if(version LESS 0)
  message(FATAL_ERROR "resumed: did not restore a checkpoint")
endif()
if(skipped EQUAL 0 AND fast_forward EQUAL 0)
  message(FATAL_ERROR "resumed: restored without skipping a loop: it ran the whole computation again")
endif()
field(full iterations all_iterations)
field(resumed iterations resumed_iterations)
if(NOT resumed_iterations LESS all_iterations)
  message(FATAL_ERROR "resumed: ran ${resumed_iterations} iterations, as many as the whole run")
endif()

math(EXPR expected_bytes "((${NX} + 2) * (${NY} + 2) + 1) * 8")
expect_same_bytes("${WORKDIR}/full.bin" "${WORKDIR}/resumed.bin" ${expected_bytes})
message(STATUS "identical u and total heat after restoring version ${version} (${MODE})")
