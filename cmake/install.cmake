# Installation of the C/C++ library: shared and static libraries, public
# headers, a CMake package (find_package(resurgo) -> resurgo::resurgo,
# resurgo::resurgo_static) and a pkg-config file (resurgo.pc).
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
# Written at install time so that prefix= names the prefix actually installed
# to (`cmake --install build --prefix DIR` differs from the configured one).
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
configure_file("${CMAKE_CURRENT_LIST_DIR}/resurgo.pc.in"
               "${PROJECT_BINARY_DIR}/resurgo.pc.in" @ONLY)
install(CODE "
  set(RESURGO_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/resurgo.pc.in\"
                 \"${PROJECT_BINARY_DIR}/resurgo.pc\" @ONLY)
")
install(FILES "${PROJECT_BINARY_DIR}/resurgo.pc"
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
