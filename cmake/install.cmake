# Installation of the C/C++ library: shared and static libraries, public
# headers, a CMake package (find_package(resurgo) -> resurgo::resurgo,
# resurgo::resurgo_static, resurgo::resurgo_fortran) and pkg-config files
# (resurgo.pc, resurgo-static.pc, resurgo-fortran.pc). docs/install.md says
# how programs use them.
#
# Included at the end of the top-level CMakeLists.txt (not under
# scikit-build), after every subdirectory that adds targets to the export set
# resurgoTargets (the Fortran module does), so install(EXPORT) sees them all.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RESURGO_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/resurgo"
    CACHE STRING "Where resurgoConfig.cmake is installed (relative to the prefix)")

install(TARGETS resurgo resurgo_static
  EXPORT resurgoTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/resurgo"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

# --- CMake package -----------------------------------------------------------
install(EXPORT resurgoTargets
  NAMESPACE resurgo::
  FILE resurgoTargets.cmake
  DESTINATION ${RESURGO_INSTALL_CMAKEDIR})

# The usage requirements of an imported target of this build, as the
# set_property() calls that resurgoConfig.cmake runs to define that target in
# a project whose languages its Find module cannot work with (FindThreads
# needs C or CXX, FindMPI's C component needs C).
function(resurgo_recorded_usage target out)
  set(code "")
  foreach(property INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS
                   INTERFACE_INCLUDE_DIRECTORIES INTERFACE_LINK_LIBRARIES
                   INTERFACE_LINK_OPTIONS)
    get_target_property(value ${target} ${property})
    if(value)
      string(APPEND code "set_property(TARGET ${target} PROPERTY ${property} [=[${value}]=])\n")
    endif()
  endforeach()
  set(${out} "${code}" PARENT_SCOPE)
endfunction()

resurgo_recorded_usage(Threads::Threads RESURGO_THREADS_USAGE)
set(RESURGO_WITH_MPI OFF)
if(MPI_C_FOUND)
  set(RESURGO_WITH_MPI ON)
  resurgo_recorded_usage(MPI::MPI_C RESURGO_MPI_C_USAGE)
endif()

# libresurgo.a is C++: a program linked by another language's compiler (a C
# or Fortran project, pkg-config with cc) needs the C++ runtime that the C++
# compiler adds (libstdc++, libm with GCC).
set(_rsg_cxx_runtime ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
list(REMOVE_ITEM _rsg_cxx_runtime ${CMAKE_C_IMPLICIT_LINK_LIBRARIES})
list(REMOVE_DUPLICATES _rsg_cxx_runtime)
list(TRANSFORM _rsg_cxx_runtime REPLACE "^(.+)$" "$<$<NOT:$<LINK_LANGUAGE:CXX>>:\\1>"
     OUTPUT_VARIABLE RESURGO_CXX_RUNTIME)

configure_package_config_file(
  "${CMAKE_CURRENT_LIST_DIR}/resurgoConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/resurgoConfig.cmake"
  INSTALL_DESTINATION ${RESURGO_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API.
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/resurgoConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/resurgoConfig.cmake"
  "${PROJECT_BINARY_DIR}/resurgoConfigVersion.cmake"
  DESTINATION ${RESURGO_INSTALL_CMAKEDIR})

# --- pkg-config --------------------------------------------------------------
foreach(_rsg_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_rsg_dir}}")
    set(RESURGO_PC_${_rsg_dir} "${CMAKE_INSTALL_${_rsg_dir}}")
  else()
    set(RESURGO_PC_${_rsg_dir} "\${prefix}/${CMAKE_INSTALL_${_rsg_dir}}")
  endif()
endforeach()
unset(_rsg_dir)
set(RESURGO_PC_VERSION "${PROJECT_VERSION}")
set(RESURGO_PC_PREFIX "@RESURGO_PC_PREFIX@")  # filled in at install time

# What the libraries' CMake targets give their users, for pkg-config: the
# compile definitions of resurgo, and MPI, which it links publicly (mpi.h
# from resurgo/mpi.hpp; -lmpi for a program that calls MPI itself).
get_target_property(_rsg_definitions resurgo INTERFACE_COMPILE_DEFINITIONS)
set(_rsg_cflags "-I\${includedir}")
set(_rsg_public_libs "")
if(_rsg_definitions)
  list(TRANSFORM _rsg_definitions PREPEND "-D")
  list(APPEND _rsg_cflags ${_rsg_definitions})
endif()
if(MPI_C_FOUND)
  foreach(_rsg_include IN LISTS MPI_C_INCLUDE_DIRS)
    list(APPEND _rsg_cflags "-I${_rsg_include}")
  endforeach()
  foreach(_rsg_lib IN LISTS MPI_C_LIBRARIES)
    if(_rsg_lib MATCHES "^(-|/)")
      list(APPEND _rsg_public_libs "${_rsg_lib}")
    else()
      list(APPEND _rsg_public_libs "-l${_rsg_lib}")
    endif()
  endforeach()
endif()
list(JOIN _rsg_cflags " " _rsg_cflags)
list(JOIN _rsg_public_libs " " _rsg_public_libs)
# What libresurgo links privately: a static link needs it too.
list(TRANSFORM _rsg_cxx_runtime PREPEND "-l")
list(JOIN _rsg_cxx_runtime " " _rsg_cxx_runtime)
set(_rsg_private_libs "-lxxhash -lzstd -llz4 -lblosc -ltomlplusplus -lpthread -ldl ${_rsg_cxx_runtime}")

# resurgo_install_pkgconfig(NAME DESCRIPTION LIBS LIBS_PRIVATE CFLAGS): writes
# NAME.pc at install time, so that prefix= names the prefix actually
# installed to (`cmake --install build --prefix DIR` differs from the
# configured one).
function(resurgo_install_pkgconfig name description libs libs_private cflags)
  set(RESURGO_PC_NAME "${name}")
  set(RESURGO_PC_DESCRIPTION "${description}")
  set(RESURGO_PC_LIBS "${libs}")
  set(RESURGO_PC_LIBS_PRIVATE "${libs_private}")
  set(RESURGO_PC_CFLAGS "${cflags}")
  set(template "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc.in")
  set(output "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/resurgo.pc.in" "${template}" @ONLY)
  install(CODE "
    set(RESURGO_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${template}\" \"${output}\" @ONLY)
  ")
  install(FILES "${output}" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

# pkg-config --libs --static cannot pick libresurgo.a over libresurgo.so (its
# Libs, -lresurgo, always come first): resurgo-static names the archive.
resurgo_install_pkgconfig(resurgo
  "Asynchronous multi-level checkpoint/restart for HPC codes"
  "-L\${libdir} -lresurgo ${_rsg_public_libs}" "${_rsg_private_libs}" "${_rsg_cflags}")
resurgo_install_pkgconfig(resurgo-static
  "Resurgo, linked statically (libresurgo.a)"
  "\${libdir}/libresurgo.a ${_rsg_public_libs} ${_rsg_private_libs}" "" "${_rsg_cflags}")
if(TARGET resurgo_fortran)
  # The module file's directory; libresurgo_fortran finds libresurgo itself
  # (its RUNPATH is $ORIGIN).
  resurgo_install_pkgconfig(resurgo-fortran
    "Fortran module of Resurgo (use resurgo)"
    "-L\${libdir} -lresurgo_fortran" "" "-I\${includedir}/resurgo/fortran")
endif()
unset(_rsg_definitions)
unset(_rsg_include)
unset(_rsg_lib)
unset(_rsg_cflags)
unset(_rsg_public_libs)
unset(_rsg_private_libs)
unset(_rsg_cxx_runtime)
