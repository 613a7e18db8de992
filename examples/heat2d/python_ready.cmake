# Included by the heat2d test scripts. skip_unless_python_ready(interpreter)
# ends the calling script, reported as skipped (the tests'
# SKIP_REGULAR_EXPRESSION "SKIP:"), unless the interpreter imports numpy and
# resurgo.
macro(skip_unless_python_ready interpreter)
  execute_process(COMMAND ${interpreter} -c "import numpy, resurgo"
    RESULT_VARIABLE python_ready_status OUTPUT_QUIET ERROR_VARIABLE python_ready_error)
  if(NOT python_ready_status EQUAL 0)
    message(STATUS "SKIP: ${interpreter} cannot import numpy and resurgo: ${python_ready_error}")
    return()
  endif()
endmacro()
