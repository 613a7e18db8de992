# Restart test of heat_mpi (cmake -P). Runs, each in a fresh directory tree
# under WORKDIR with its own L2 (one directory per node) and L4 directories:
#   full:    the whole run, uninterrupted;
#   stopped: the same run stopped after STOP_AFTER steps (exits normally);
#   resumed: the same command again, which must restart from the newest
#            version of `stopped` and finish the run;
#   serial:  heat2d, the same problem in one process (SERIAL, optional).
# Fails unless `resumed` (and `serial`) end with exactly the bytes of `full`.
#
#   cmake "-DPROGRAM=mpirun|-np|2|heat_mpi" [-DSERIAL=heat2d] -DWORKDIR=dir
#         [-DNX= -DNY= -DSTEPS= -DEVERY= -DSTOP_AFTER=] -P restart_test.cmake
#
# PROGRAM is the launcher and the program, its words joined by "|".
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../restart_check.cmake)
require_defined(PROGRAM WORKDIR)
default_values(NX=96 NY=67 STEPS=60 EVERY=10 STOP_AFTER=35)  # 67 rows: uneven blocks
string(REPLACE "|" ";" program "${PROGRAM}")
math(EXPR expected_restart "${STOP_AFTER} / ${EVERY} * ${EVERY}")
set(problem --nx ${NX} --ny ${NY} --steps ${STEPS} --every ${EVERY})

file(REMOVE_RECURSE "${WORKDIR}")

# Runs `command` as `tag` in the directories of `tree`; sets RESULT_<tag>
# and OUTPUT_<tag> (the path of the field).
function(run tag tree)
  set(dir "${WORKDIR}/${tree}")
  file(MAKE_DIRECTORY "${dir}")
  set(ENV{RESURGO_LOCAL_PATH} "${dir}/node{node}")
  set(ENV{RESURGO_PERSISTENT_PATH} "${dir}/persistent")
  set(output "${dir}/field.bin")
  run_for_result(${tag} "${dir}" ${ARGN} --output "${output}")
  set(RESULT_${tag} "${RESULT_${tag}}" PARENT_SCOPE)
  set(OUTPUT_${tag} "${output}" PARENT_SCOPE)
endfunction()

run(full full ${program} ${problem} --store heat)
expect(full restarted_from -1)
expect(full steps ${STEPS})

run(stopped interrupted ${program} ${problem} --store heat --stop-after ${STOP_AFTER})
expect(stopped steps ${STOP_AFTER})
if(EXISTS "${OUTPUT_stopped}")
  message(FATAL_ERROR "stopped: wrote ${OUTPUT_stopped} before the last step")
endif()

run(resumed interrupted ${program} ${problem} --store heat)
expect(resumed restarted_from ${expected_restart})
math(EXPR rest "${STEPS} - ${expected_restart}")
expect(resumed steps_run ${rest})

math(EXPR expected_bytes "${NX} * ${NY} * 8")
expect_same_bytes("${OUTPUT_full}" "${OUTPUT_resumed}" ${expected_bytes})
message(STATUS "identical final fields after restart from version ${expected_restart}")

if(SERIAL)
  run(serial serial "${SERIAL}" ${problem} --store serial)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${OUTPUT_serial}" "${OUTPUT_full}"
    RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "heat_mpi and heat2d (one process) ended with different fields: the blocks or "
                        "their halo exchange are wrong:\n  ${OUTPUT_full}\n  ${OUTPUT_serial}")
  endif()
  message(STATUS "the same bytes as heat2d in one process")
endif()
