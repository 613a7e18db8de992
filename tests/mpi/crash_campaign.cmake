# The crash campaign over ranks: each rank of a 4-rank job in turn dies
# (SIGKILL) while version 3 is on its way, at once after checkpoint(3)
# returned or after a delay, so that the kill falls in the capture's
# write, before or after L2, in the job thread's steps or during L4. A new
# job must then restart, on every rank, version 2 (the newest complete
# before the kill) or version 3 when the job completed it before the kill,
# with its bytes.
#   -DROUNDS=n   n rounds over the 4 ranks (default 1: no delay); rounds
#                after the first draw delays of 0 to 40 ms.
#   -DRANKS=n    a job of n ranks instead of 4.
if(NOT DEFINED ROUNDS)
  set(ROUNDS 1)
endif()
if(NOT DEFINED RANKS)
  set(RANKS 4)
endif()
math(EXPR last_rank "${RANKS} - 1")
set(kills 0)
set(restored_newer 0)
foreach(round RANGE 1 ${ROUNDS})
  foreach(rank RANGE ${last_rank})
    set(delay_us 0)
    if(round GREATER 1)
      string(RANDOM LENGTH 5 ALPHABET 0123456789 digits)
      math(EXPR delay_us "${digits} % 40000")
    endif()
    file(REMOVE_RECURSE ${DIR})
    set(ENV{RESURGO_LOCAL_PATH} "${DIR}/node{node}")
    set(ENV{RESURGO_PERSISTENT_PATH} "${DIR}/l4")
    set(ENV{RESURGO_PERSISTENT_EVERY} 1)
    execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} ${RANKS} ${CHECK} crash ${rank} 3 ${delay_us}
                    RESULT_VARIABLE killed OUTPUT_QUIET ERROR_QUIET)
    if(killed EQUAL 0)
      message(FATAL_ERROR "rank ${rank} was to die during version 3, but the job ended normally")
    endif()
    execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} ${RANKS} ${CHECK} verify-at-least 2
                    RESULT_VARIABLE restarted OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT restarted EQUAL 0)
      message(FATAL_ERROR "after rank ${rank} died ${delay_us} us into version 3, the job did not restart "
                          "version 2 or 3 with its bytes:\n${out}${err}")
    endif()
    math(EXPR kills "${kills} + 1")
    if(out MATCHES "restored version 3")
      math(EXPR restored_newer "${restored_newer} + 1")
    endif()
  endforeach()
endforeach()
message(STATUS "${kills} kills of one rank during version 3: every restart restored a complete version, bit for "
               "bit (version 3, completed before the kill, ${restored_newer} times; version 2 otherwise)")
