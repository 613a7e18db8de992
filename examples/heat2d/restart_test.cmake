# Restart test of a heat2d program (cmake -P). Runs, each in a fresh
# directory tree under WORKDIR with its own L2 and L4 directories:
#   full:    the whole run, uninterrupted;
#   stopped: the same run stopped after STOP_AFTER steps (exits normally);
#   resumed: the same command again, which must restart from the last
#            checkpoint of `stopped` and finish the run.
# Fails unless `resumed` ends with exactly the bytes of `full`. INTERPRETER
# (optional) runs PROGRAM as a script: heat2d.py.
#
#   cmake -DPROGRAM=path [-DINTERPRETER=python] -DSTYLE=options|positional
#         -DWORKDIR=dir [-DNX= -DNY= -DSTEPS= -DEVERY= -DSTOP_AFTER=] -P restart_test.cmake
#
# STYLE options:    PROGRAM --nx NX --ny NY --steps S --every K --store NAME --output F [--stop-after T]
# STYLE positional: PROGRAM NX NY S K NAME F [T]                           (heat2d_f90)
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../restart_check.cmake)
require_defined(PROGRAM STYLE WORKDIR)
default_values(NX=96 NY=64 STEPS=60 EVERY=10 STOP_AFTER=35)
math(EXPR expected_restart "${STOP_AFTER} / ${EVERY} * ${EVERY}")

# A script (heat2d.py) needs its interpreter to import numpy and resurgo;
# without them the test reports itself skipped (SKIP_REGULAR_EXPRESSION).
include(${CMAKE_CURRENT_LIST_DIR}/python_ready.cmake)
if(INTERPRETER)
  skip_unless_python_ready(${INTERPRETER})
endif()

file(REMOVE_RECURSE "${WORKDIR}")

# Runs the program as `tag` in the directories of `tree`; sets RESULT_<tag>
# to the JSON after "RESULT " and OUTPUT_<tag> to the path of the field.
function(heat2d tag tree stop_after)
  set(dir "${WORKDIR}/${tree}")
  file(MAKE_DIRECTORY "${dir}")
  set(ENV{RESURGO_LOCAL_PATH} "${dir}/local")
  set(ENV{RESURGO_PERSISTENT_PATH} "${dir}/persistent")
  set(output "${dir}/field.bin")
  if(STYLE STREQUAL "options")
    set(args --nx ${NX} --ny ${NY} --steps ${STEPS} --every ${EVERY} --store heat2d
             --output "${output}" --stop-after ${stop_after})
  else()
    set(args ${NX} ${NY} ${STEPS} ${EVERY} heat2d "${output}" ${stop_after})
  endif()
  run_for_result(${tag} "${dir}" ${INTERPRETER} "${PROGRAM}" ${args})
  set(RESULT_${tag} "${RESULT_${tag}}" PARENT_SCOPE)
  set(OUTPUT_${tag} "${output}" PARENT_SCOPE)
endfunction()

heat2d(full full -1)
expect(full restarted_from -1)
expect(full steps ${STEPS})

heat2d(stopped interrupted ${STOP_AFTER})
expect(stopped steps ${STOP_AFTER})
if(EXISTS "${OUTPUT_stopped}")
  message(FATAL_ERROR "stopped: wrote ${OUTPUT_stopped} before the last step")
endif()

heat2d(resumed interrupted -1)
expect(resumed restarted_from ${expected_restart})
expect(resumed steps ${STEPS})
math(EXPR rest "${STEPS} - ${expected_restart}")
expect(resumed steps_run ${rest})

math(EXPR expected_bytes "${NX} * ${NY} * 8")
expect_same_bytes("${OUTPUT_full}" "${OUTPUT_resumed}" ${expected_bytes})
message(STATUS "identical final fields after restart from version ${expected_restart}")
