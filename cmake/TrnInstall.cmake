# Installation: the library, the public headers, a CMake package (find_package(trn)) and a
# pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS trn EXPORT trnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/trn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT trnTargets NAMESPACE trn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
configure_package_config_file(cmake/trnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/trnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/trnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/trnConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/trnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
configure_file(cmake/trn.pc.in ${CMAKE_CURRENT_BINARY_DIR}/trn.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/trn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
