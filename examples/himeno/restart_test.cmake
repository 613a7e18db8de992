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

include(${CMAKE_CURRENT_LIST_DIR}/../restart_check.cmake)
require_defined(PROGRAM WORKDIR)
# 63 interior slices in ranges of 8: 8 ranges a sweep; 67 = 8 sweeps + 3 ranges.
default_values(NX=33 NY=33 NZ=65 SWEEPS=12 S=8 N=3 STOP_AFTER=67)

file(REMOVE_RECURSE "${WORKDIR}")

# Runs the program as `tag` in the directory `tree`; sets RESULT_<tag> to the
# JSON after "RESULT ", GOSA_<tag> to the printed gosa and OUTPUT_<tag> to the
# path of the final state.
function(himeno tag tree stop_after)
  set(dir "${WORKDIR}/${tree}")
  file(MAKE_DIRECTORY "${dir}")
  set(output "${dir}/final.bin")
  run_for_result(${tag} "${dir}" "${PROGRAM}" ${NX} ${NY} ${NZ} ${SWEEPS} ${S} ${N} "${dir}/checkpoints/himeno"
                 "${output}" ${stop_after})
  set(RESULT_${tag} "${RESULT_${tag}}" PARENT_SCOPE)
  set(GOSA_${tag} "" PARENT_SCOPE)
  if(STDOUT_${tag} MATCHES "gosa ([^\n]*)")
    set(GOSA_${tag} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  endif()
  set(OUTPUT_${tag} "${output}" PARENT_SCOPE)
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
math(EXPR expected_bytes "(${NX} * ${NY} * ${NZ} + 1) * 4")
expect_same_bytes("${OUTPUT_full}" "${OUTPUT_resumed}" ${expected_bytes})
message(STATUS "identical p and gosa (${GOSA_full}) after restart from version ${taken}")
