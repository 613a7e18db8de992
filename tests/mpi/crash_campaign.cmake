# Kills each rank of a 4-rank job in turn while version 3 is on its way
# (mpi_store_check crash), then checks that a new job restarts version 2,
# the newest complete one, on every rank with its bytes.
foreach(rank RANGE 3)
  file(REMOVE_RECURSE ${DIR})
  set(ENV{RESURGO_LOCAL_PATH} "${DIR}/node{node}")
  set(ENV{RESURGO_PERSISTENT_PATH} "${DIR}/l4")
  set(ENV{RESURGO_PERSISTENT_EVERY} 1)
  execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} 4 ${CHECK} crash ${rank} 3
                  RESULT_VARIABLE killed OUTPUT_QUIET ERROR_QUIET)
  if(killed EQUAL 0)
    message(FATAL_ERROR "rank ${rank} was to die during version 3, but the job ended normally")
  endif()
  execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} 4 ${CHECK} verify 2 RESULT_VARIABLE restarted)
  if(NOT restarted EQUAL 0)
    message(FATAL_ERROR "after rank ${rank} died during version 3, the job did not restart version 2")
  endif()
  message(STATUS "rank ${rank} killed during version 3: the job restarted version 2")
endforeach()
