# Restart test of the automatic runtime in an MPI job (issue 31 part 1;
# examples/auto/tealeaf_mpi.cpp), cmake -P. In WORKDIR, with one directory
# of levels per run (L2 per fake node):
#   full:    the run uninterrupted;
#   killed:  the run with a checkpoint requested every EVERY steps (by rank 0
#            alone), killed by KILL (tealeaf_mpi's options: --kill-step K,
#            --kill-loop L or --kill-checkpoint C, with --kill-rank R, -1
#            for every rank): the job must fail;
#   resumed: the killed command without the kill: it restores what the job
#            completed (REQUIRE_RESTORE: it must restore something) and must
#            end with the checksum and, on every rank, the bytes of full.
# RANDOM_KILLS=n instead of KILL: n kills at random loops of random ranks
# (or of every rank), each in a directory of its own.
#
#   cmake -DLAUNCH="mpiexec|-n|4" -DRANKS=4 -DPROGRAM=path -DWORKDIR=dir -DMODE=initphase|fastfw
#         (-DKILL="--kill-step;4;--kill-rank;1" [-DREQUIRE_RESTORE=ON] | -DRANDOM_KILLS=n)
#         [-DSTEPS=8 -DEVERY=2 -DLOOPS=3000] -P auto_restart.cmake
cmake_minimum_required(VERSION 3.25)

include(${CMAKE_CURRENT_LIST_DIR}/../../examples/restart_check.cmake)
require_defined(LAUNCH RANKS PROGRAM WORKDIR MODE)
default_values(STEPS=8 EVERY=2 LOOPS=3000 RANDOM_KILLS=0 REQUIRE_RESTORE=OFF)
string(REPLACE "|" ";" LAUNCH "${LAUNCH}")
set(run ${LAUNCH} ${PROGRAM} --mode ${MODE} --steps ${STEPS})

file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")

set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/full/node{node}")
run_for_result(full "${WORKDIR}" ${run} --dump "${WORKDIR}/full")
field(full checksum full_checksum)

# The run `tag` killed by ARGN, then resumed: fails unless it ends as full
# did; sets RESTORED_<tag> to the version restored (-1: none).
function(kill_and_resume tag)
  set(ENV{RESURGO_LOCAL_PATH} "${WORKDIR}/${tag}/node{node}")
  set(interrupted ${run} --checkpoint-every ${EVERY})
  execute_process(COMMAND ${interrupted} ${ARGN}
    WORKING_DIRECTORY "${WORKDIR}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${tag} killed by ${ARGN}: exit ${rc}\n${out}${err}")
  if(rc EQUAL 0 OR out MATCHES "RESULT ")
    message(FATAL_ERROR "${tag}: the job was to die (${ARGN}) but finished")
  endif()
  run_for_result(${tag} "${WORKDIR}" ${interrupted} --dump "${WORKDIR}/${tag}")
  field(${tag} checksum checksum)
  if(NOT checksum STREQUAL full_checksum)
    message(FATAL_ERROR "${tag}: checksums differ: uninterrupted ${full_checksum}, resumed ${checksum}")
  endif()
  math(EXPR last "${RANKS} - 1")
  foreach(rank RANGE ${last})
    file(SIZE "${WORKDIR}/full.${rank}" bytes)
    expect_same_bytes("${WORKDIR}/full.${rank}" "${WORKDIR}/${tag}.${rank}" ${bytes})
  endforeach()
  string(JSON version ERROR_VARIABLE none GET "${RESULT_${tag}}" restore version)
  if(none)
    set(version -1)
  endif()
  set(RESTORED_${tag} ${version} PARENT_SCOPE)
endfunction()

if(DEFINED KILL)
  kill_and_resume(killed ${KILL})
  if(REQUIRE_RESTORE AND RESTORED_killed LESS 0)
    message(FATAL_ERROR "killed: the resumed run restored no version: it ran the whole computation again")
  endif()
  message(STATUS "identical on ${RANKS} ranks (checksum ${full_checksum}) after restoring version ${RESTORED_killed}")
endif()

set(restored 0)
foreach(round RANGE 1 ${RANDOM_KILLS})
  if(round GREATER RANDOM_KILLS)
    break()
  endif()
  string(RANDOM LENGTH 6 ALPHABET 0123456789 digits)
  math(EXPR loop "1 + ${digits} % ${LOOPS}")
  math(EXPR rank "${digits} % (${RANKS} + 1) - 1")
  kill_and_resume(random${round} --kill-loop ${loop} --kill-rank ${rank})
  if(RESTORED_random${round} GREATER_EQUAL 0)
    math(EXPR restored "${restored} + 1")
  endif()
endforeach()
if(RANDOM_KILLS GREATER 0)
  message(STATUS "${RANDOM_KILLS} kills at random loops on ${RANKS} ranks: every resumed run identical "
                 "(${restored} restored a version, the others were killed before the job completed one)")
endif()
