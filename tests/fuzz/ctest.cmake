# Registers the quick fuzz run (tests/fuzz/run.sh quick: builds the libFuzzer
# targets with clang into build/fuzz, then 15 s per target) as the CTest test
# fuzz.quick, only when a clang++ that links -fsanitize=fuzzer is found.
# Included from tests/CMakeLists.txt: include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/ctest.cmake)
find_program(RESURGO_CLANGXX NAMES clang++-14 clang++ DOC "clang++ for the libFuzzer targets")

if(RESURGO_CLANGXX AND NOT DEFINED RESURGO_LIBFUZZER_WORKS)
  set(_fuzz_probe_dir "${CMAKE_BINARY_DIR}/CMakeFiles/resurgo_libfuzzer_probe")
  file(MAKE_DIRECTORY "${_fuzz_probe_dir}")
  file(WRITE "${_fuzz_probe_dir}/probe.cpp"
       "#include <cstddef>\n#include <cstdint>\n"
       "extern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
  execute_process(
    COMMAND "${RESURGO_CLANGXX}" -fsanitize=fuzzer,address,undefined probe.cpp -o probe
    WORKING_DIRECTORY "${_fuzz_probe_dir}"
    RESULT_VARIABLE _fuzz_probe_result OUTPUT_QUIET ERROR_QUIET)
  if(_fuzz_probe_result EQUAL 0)
    set(RESURGO_LIBFUZZER_WORKS ON CACHE BOOL "clang++ links -fsanitize=fuzzer")
  else()
    set(RESURGO_LIBFUZZER_WORKS OFF CACHE BOOL "clang++ links -fsanitize=fuzzer")
  endif()
endif()

# A libFuzzer run is one process on one core: ctest runs the other tests
# beside it (its build takes one job), and starts it first (COST) so that it
# does not end the suite alone.
if(RESURGO_CLANGXX AND RESURGO_LIBFUZZER_WORKS)
  add_test(NAME fuzz.quick
           COMMAND ${CMAKE_COMMAND} -E env FUZZ_CXX=${RESURGO_CLANGXX} FUZZ_JOBS=1
                   bash ${CMAKE_CURRENT_LIST_DIR}/run.sh quick)
  set_tests_properties(fuzz.quick PROPERTIES TIMEOUT 300 LABELS fuzz COST 10000)
else()
  message(STATUS "resurgo: no clang++ with libFuzzer found; the fuzz.quick test is not registered")
endif()
