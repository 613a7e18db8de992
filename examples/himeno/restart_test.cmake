# Restart test of the himeno example (cmake -P). Runs, each in a fresh
# directory under WORKDIR with its own store:
#   full:    the whole run, uninterrupted;
#   stopped: the same run stopped after STOP_AFTER slice ranges;
#   resumed: the same command again, which must read the newest checkpoint
#            of `stopped` back and finish the run.
# Fails unless `resumed` ends with exactly the bytes (p and gosa) of `full`.
# The defaults stop in the 9th sweep, one of those checkpointed (N = 3), so
# that the run resumes in the middle of a sweep, from version 19: a delta
# (with delta.full_every = 10, versions 1, 11, 21, ... are full).
#
#   cmake -DPROGRAM=path -DWORKDIR=dir [-DNX= -DNY= -DNZ= -DSWEEPS= -DS= -DN= -DSTOP_AFTER=]
#         -P restart_test.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var PROGRAM WORKDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "restart_test.cmake: -D${var}= is required")
  endif()
endforeach()
# 63 interior slices in ranges of 8: 8 ranges a sweep; 67 = 8 sweeps + 3 ranges.
foreach(pair NX=33 NY=33 NZ=65 SWEEPS=12 S=8 N=3 STOP_AFTER=67)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 name)
  list(GET pair 1 value)
  if(NOT DEFINED ${name})
    set(${name} ${value})
  endif()
endforeach()

file(REMOVE_RECURSE "${WORKDIR}")

# Runs the program as `tag` in the directory `tree`; sets RESULT_<tag> to the
# JSON after "RESULT ", GOSA_<tag> to the printed gosa and OUTPUT_<tag> to the
# path of the final state.
function(himeno tag tree stop_after)
  set(dir "${WORKDIR}/${tree}")
  file(MAKE_DIRECTORY "${dir}")
  set(output "${dir}/final.bin")
  execute_process(COMMAND "${PROGRAM}" ${NX} ${NY} ${NZ} ${SWEEPS} ${S} ${N} "${dir}/checkpoints/himeno"
                          "${output}" ${stop_after}
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
  set(GOSA_${tag} "" PARENT_SCOPE)
  if(out MATCHES "gosa ([^\n]*)")
    set(GOSA_${tag} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
  set(OUTPUT_${tag} "${output}" PARENT_SCOPE)
endfunction()

# Value of the JSON field `key` of run `tag`, into `out`.
function(field tag key out)
  string(JSON value GET "${RESULT_${tag}}" ${key})
  set(${out} ${value} PARENT_SCOPE)
endfunction()

# Fails unless the JSON field `key` of run `tag` equals `expected`.
function(expect tag key expected)
  field(${tag} ${key} value)
  if(NOT value EQUAL expected)
    message(FATAL_ERROR "${tag}: ${key} is ${value}, expected ${expected}")
  endif()
endfunction()

himeno(full full -1)
expect(full restarted_from -1)
expect(full sweeps ${SWEEPS})

himeno(stopped interrupted ${STOP_AFTER})
expect(stopped stopped 1)
if(EXISTS "${OUTPUT_stopped}")
  message(FATAL_ERROR "stopped: wrote ${OUTPUT_stopped} before the end of the run")
endif()

himeno(resumed interrupted -1)
field(stopped checkpoints taken)
expect(resumed restarted_from ${taken})  # versions 1, 2, ...: the newest is the last one taken
expect(resumed sweeps ${SWEEPS})
field(full ranges_run all_ranges)
field(resumed ranges_run resumed_ranges)
if(NOT resumed_ranges LESS all_ranges)
  message(FATAL_ERROR "resumed: ran ${resumed_ranges} slice ranges, as many as the whole run")
endif()

if(NOT GOSA_full OR NOT GOSA_full STREQUAL GOSA_resumed)
  message(FATAL_ERROR "gosa differs: uninterrupted '${GOSA_full}', resumed '${GOSA_resumed}'")
endif()
file(SIZE "${OUTPUT_full}" bytes)
math(EXPR expected_bytes "(${NX} * ${NY} * ${NZ} + 1) * 4")
if(NOT bytes EQUAL expected_bytes)
  message(FATAL_ERROR "${OUTPUT_full} has ${bytes} bytes, expected ${expected_bytes}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${OUTPUT_full}" "${OUTPUT_resumed}"
  RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR "the resumed run ended with other bytes than the uninterrupted one:\n"
                      "  ${OUTPUT_full}\n  ${OUTPUT_resumed}")
endif()
message(STATUS "identical p and gosa (${GOSA_full}) after restart from version ${taken}")
