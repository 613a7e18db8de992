# A rank of a 2-rank job dies (SIGKILL) after the other rank wrote versions
# 13 and 14, which the job could not commit (issue 28, item 2). A new job
# must restart version 12 on every rank and go on: checkpoint 13 and 14
# (the dead run's files of them must not count) and restart 14.
file(REMOVE_RECURSE ${DIR})
set(ENV{RESURGO_LOCAL_PATH} "${DIR}/node{node}")
set(ENV{RESURGO_PERSISTENT_PATH} "${DIR}/l4")
set(ENV{RESURGO_PERSISTENT_EVERY} 1)
execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} 2 ${CHECK} die 1
                RESULT_VARIABLE died OUTPUT_QUIET ERROR_QUIET)
if(died EQUAL 0)
  message(FATAL_ERROR "rank 1 was to die after version 12, but the job ended normally")
endif()
execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} 2 ${CHECK} continue
                RESULT_VARIABLE went_on OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT went_on EQUAL 0)
  message(FATAL_ERROR "after rank 1 died, the job did not restart version 12 and go on:\n${out}${err}")
endif()
