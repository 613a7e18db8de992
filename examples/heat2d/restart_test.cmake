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

foreach(var PROGRAM STYLE WORKDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "restart_test.cmake: -D${var}= is required")
  endif()
endforeach()
foreach(pair NX=96 NY=64 STEPS=60 EVERY=10 STOP_AFTER=35)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 name)
  list(GET pair 1 value)
  if(NOT DEFINED ${name})
    set(${name} ${value})
  endif()
endforeach()
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
  execute_process(COMMAND ${INTERPRETER} "${PROGRAM}" ${args}
    WORKING_DIRECTORY "${dir}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${tag}: exit ${rc}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: ${PROGRAM} failed with exit status ${rc}")
  endif()
  if(NOT out MATCHES "RESULT ({[^\n]*})")
    message(FATAL_ERROR "${tag}: no RESULT line")
  endif()
  set(RESULT_${tag} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(OUTPUT_${tag} "${output}" PARENT_SCOPE)
endfunction()

# Fails unless the JSON field `key` of run `tag` equals `expected`.
function(expect tag key expected)
  string(JSON value GET "${RESULT_${tag}}" ${key})
  if(NOT value EQUAL expected)
    message(FATAL_ERROR "${tag}: ${key} is ${value}, expected ${expected}")
  endif()
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

file(SIZE "${OUTPUT_full}" bytes)
math(EXPR expected_bytes "${NX} * ${NY} * 8")
if(NOT bytes EQUAL expected_bytes)
  message(FATAL_ERROR "${OUTPUT_full} has ${bytes} bytes, expected ${expected_bytes}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${OUTPUT_full}" "${OUTPUT_resumed}"
  RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "the resumed run ended with other bytes than the uninterrupted one:\n"
                      "  ${OUTPUT_full}\n  ${OUTPUT_resumed}")
endif()
message(STATUS "identical final fields after restart from version ${expected_restart}")
