# The crash campaign of ConvergentMatrix::write_global (matrix_crash_check):
# for each file order, a 3-rank job writes generation 1; then, round after
# round, each rank in turn dies (SIGKILL) a random delay into a job's
# rewrite of the file with the next generation. After every kill the file
# must verify and hold the old generation or the new one whole, never a mix
# (the write goes to a temporary renamed once every rank's bytes are
# synced); the next round rewrites over whichever it holds. A complete
# write at the end must remove the temporaries the killed ones left.
#   -DROUNDS=n   rounds over the 3 ranks (default 1)
#   -DCHECK=...  matrix_crash_check; -DLAUNCHER, -DNUMPROC_FLAG, -DDIR
if(NOT DEFINED ROUNDS)
  set(ROUNDS 1)
endif()
# run(NAME RANKS ARGS...): runs matrix_crash_check on RANKS ranks; its
# output in NAME_out, its exit status in NAME_status.
macro(run name ranks)
  execute_process(COMMAND ${LAUNCHER} ${NUMPROC_FLAG} ${ranks} ${CHECK} ${ARGN}
                  RESULT_VARIABLE ${name}_status OUTPUT_VARIABLE ${name}_out ERROR_VARIABLE ${name}_err)
endmacro()
foreach(order rows cols)
  file(REMOVE_RECURSE ${DIR})
  run(base 3 base ${DIR} ${order})
  if(NOT base_status EQUAL 0)
    message(FATAL_ERROR "the ${order} file's first write failed:\n${base_out}${base_err}")
  endif()
  # Delays from 0 to 1.5 times an uninterrupted write, so that kills fall
  # before, during and after it.
  string(REGEX MATCH "took ([0-9]+)" took "${base_out}")
  math(EXPR spread_us "${CMAKE_MATCH_1} * 1500 + 1")
  set(old 1)
  set(kept 0)
  set(replaced 0)
  foreach(round RANGE 1 ${ROUNDS})
    foreach(rank 0 1 2)
      math(EXPR new "${old} + 1")
      string(RANDOM LENGTH 6 ALPHABET 0123456789 digits)
      math(EXPR delay_us "${digits} % ${spread_us}")
      run(crash 3 crash ${DIR} ${order} ${new} ${rank} ${delay_us})
      if(crash_status EQUAL 0)
        message(FATAL_ERROR "rank ${rank} was to die ${delay_us} us into the ${order} file's rewrite, but the job "
                            "ended normally")
      endif()
      run(after 1 after ${DIR} ${order} ${old} ${new})
      if(NOT after_status EQUAL 0)
        message(FATAL_ERROR "after rank ${rank} died ${delay_us} us into the ${order} file's rewrite with "
                            "generation ${new}, the file does not hold generation ${old} or ${new} whole:\n"
                            "${after_out}${after_err}")
      endif()
      if(after_out MATCHES "holds generation ${new};")
        set(old ${new})
        math(EXPR replaced "${replaced} + 1")
      else()
        math(EXPR kept "${kept} + 1")
      endif()
      string(REGEX MATCH "([0-9]+) temporaries left" left "${after_out}")
      set(temporaries ${CMAKE_MATCH_1})
    endforeach()
  endforeach()
  # A write that completes removes the temporaries the killed ones left.
  run(clean 3 base ${DIR} ${order})
  run(cleaned 1 after ${DIR} ${order} 1 1)
  if(NOT clean_status EQUAL 0 OR NOT cleaned_status EQUAL 0 OR NOT cleaned_out MATCHES "; 0 temporaries left")
    message(FATAL_ERROR "a complete write of the ${order} file after the kills failed or left temporaries:\n"
                        "${clean_out}${clean_err}${cleaned_out}${cleaned_err}")
  endif()
  # One that cannot be removed (here a directory of a temporary's name)
  # leaves the write done, with a warning that names it.
  set(stuck ${DIR}/crash-${order}.rsgm.partial-0123456789abcdef)
  file(MAKE_DIRECTORY ${stuck})
  run(stuck 3 base ${DIR} ${order})
  if(NOT stuck_status EQUAL 0 OR NOT stuck_err MATCHES "could not be removed" OR NOT IS_DIRECTORY ${stuck})
    message(FATAL_ERROR "a temporary that cannot be removed should leave the write done, with a warning:\n"
                        "${stuck_out}${stuck_err}")
  endif()
  math(EXPR kills "${ROUNDS} * 3")
  message(STATUS "${order}-major file: ${kills} kills during a rewrite (delays 0 to ${spread_us} us); the file held "
                 "the old matrix whole ${kept} times and the new one ${replaced} times, never a mix; "
                 "${temporaries} temporaries left, which the next complete write removed")
endforeach()
