# Checks the job manifest that test_mpi (checkpoint) wrote (cmake -P): the
# Fortran block u(3, 4) of rank r, rows r*3+1.. of G(3 * RANKS, 4), must
# reach the row-major library reversed: shape [4, 3], global shape
# [4, 3 * RANKS], offset [0, 3 * r].
#   cmake -DMANIFEST_DIR=dir -DRANKS=n -P mpi_layout.cmake
cmake_minimum_required(VERSION 3.25)

file(GLOB_RECURSE manifests "${MANIFEST_DIR}/*v0000000002.job")
list(LENGTH manifests found)
if(NOT found EQUAL 1)
  message(FATAL_ERROR "expected one manifest of version 2 under ${MANIFEST_DIR}, found ${found}: ${manifests}")
endif()
file(STRINGS "${manifests}" lines)
list(GET lines 0 json)

# Fails unless the JSON array `key` of region `index` equals `expected` (a list).
function(expect_axes index key expected)
  string(JSON text GET "${json}" regions ${index} ${key})
  string(REGEX REPLACE "[][ \n]" "" text "${text}")
  string(REPLACE "," ";" axes "${text}")
  if(NOT axes STREQUAL expected)
    list(JOIN expected "," expected)
    message(FATAL_ERROR "region ${index} (rank ${rank}) has ${key} [${text}], expected [${expected}]")
  endif()
endfunction()

math(EXPR global_rows "3 * ${RANKS}")
set(checked 0)
string(JSON regions LENGTH "${json}" regions)
math(EXPR last "${regions} - 1")
foreach(index RANGE ${last})
  string(JSON label GET "${json}" regions ${index} label)
  if(NOT label STREQUAL "field")
    continue()
  endif()
  string(JSON rank GET "${json}" regions ${index} rank)
  math(EXPR offset "3 * ${rank}")
  expect_axes(${index} shape "4;3")
  expect_axes(${index} global_shape "4;${global_rows}")
  expect_axes(${index} offset "0;${offset}")
  math(EXPR checked "${checked} + 1")
endforeach()
if(NOT checked EQUAL RANKS)
  message(FATAL_ERROR "the manifest describes ${checked} blocks of 'field', expected ${RANKS}")
endif()
message(STATUS "the manifest holds the ${RANKS} Fortran blocks in row-major order")
