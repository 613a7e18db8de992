# What the examples' restart tests (cmake -P) share: their arguments, one run
# of a program that prints "RESULT {json}", the checks of that JSON, and the
# final bytewise comparison of an uninterrupted and a resumed run.

# Fails unless every variable named is defined (-DNAME=...).
function(require_defined)
  foreach(var ${ARGN})
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${CMAKE_SCRIPT_MODE_FILE}: -D${var}= is required")
    endif()
  endforeach()
endfunction()

# NAME=VALUE pairs: sets NAME to VALUE where -DNAME= did not.
macro(default_values)
  foreach(pair ${ARGN})
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 value)
    if(NOT DEFINED ${name})
      set(${name} ${value})
    endif()
  endforeach()
endmacro()

# Runs the command ARGN in `dir` as `tag`: fails unless it exits 0 and prints
# a RESULT line; sets RESULT_<tag> (the JSON) and STDOUT_<tag> in the caller.
function(run_for_result tag dir)
  execute_process(COMMAND ${ARGN}
    WORKING_DIRECTORY "${dir}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${tag}: exit ${rc}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${tag}: ${ARGV2} failed with exit status ${rc}")
  endif()
  if(NOT out MATCHES "RESULT ({[^\n]*})")
    message(FATAL_ERROR "${tag}: no RESULT line")
  endif()
  set(RESULT_${tag} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  set(STDOUT_${tag} "${out}" PARENT_SCOPE)
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

# Fails unless `full` has `bytes` bytes and `resumed` the same bytes.
function(expect_same_bytes full resumed bytes)
  file(SIZE "${full}" size)
  if(NOT size EQUAL bytes)
    message(FATAL_ERROR "${full} has ${size} bytes, expected ${bytes}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${full}" "${resumed}" RESULT_VARIABLE differ)
  if(NOT differ EQUAL 0)
    message(FATAL_ERROR "the resumed run ended with other bytes than the uninterrupted one:\n"
                        "  ${full}\n  ${resumed}")
  endif()
endfunction()
