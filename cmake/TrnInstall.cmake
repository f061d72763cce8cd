# Installation: the library, the public headers, a CMake package (find_package(trn)) and a
# pkg-config file.
include(CMakePackageConfigHelpers)
# libtrn_ops (eager ops, docs/ops.md) lies beside libtrn; find_package(trn) gives trn::ops.
set_target_properties(trn_ops PROPERTIES EXPORT_NAME ops)
# libtrn_comm (collectives, docs/collectives.md) likewise gives trn::comm.
set_target_properties(trn_comm PROPERTIES EXPORT_NAME comm)
# The safetensors reader and writer (C++, trn/safetensors.hpp) are static archives: trn::safetensors.
install(TARGETS trn trn_ops trn_comm trn_safetensors trn_safetensors_header EXPORT trnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Drivers lie beside libtrn, which finds them there (docs/ARCHITECTURE.md, "Driver discovery").
install(TARGETS trn-driver-sim LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/trn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT trnTargets NAMESPACE trn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
# The kernel builder (docs/kbuild.md), C++: static archives (the builder, the ISA it emits, and the
# common layer they log through with spdlog) and their headers, which name each other as
# "kbuild/..." and "isa/..." from include/trn-kbuild. find_package(trn) gives trn::kbuild where
# spdlog's package is found (trnConfig.cmake); its own export set keeps trn::trn free of spdlog.
set_target_properties(trn_kbuild PROPERTIES EXPORT_NAME kbuild)
set_target_properties(trn_isa PROPERTIES EXPORT_NAME isa)
set_target_properties(trn_common PROPERTIES EXPORT_NAME common)
install(TARGETS trn_kbuild trn_isa trn_common EXPORT trnKbuildTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT trnKbuildTargets NAMESPACE trn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
foreach(dir kbuild isa)
  install(DIRECTORY src/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/trn-kbuild/${dir}
          FILES_MATCHING PATTERN "*.hpp")
endforeach()
# docs/kbuild.md's example, with a CMakeLists.txt that builds it against the installed tree.
install(FILES examples/kbuild_softmax/kbuild_softmax.cpp examples/kbuild_softmax/CMakeLists.txt
        DESTINATION ${CMAKE_INSTALL_DATADIR}/trn/examples/kbuild_softmax)
configure_package_config_file(cmake/trnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/trnConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/trnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/trnConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/trnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/trn)
# The .pc file finds its prefix from where it lies (${pcfiledir}), so an installed tree can
# move (cmake --install --prefix P, a package's staging directory).
file(RELATIVE_PATH TRN_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" TRN_PC_TO_PREFIX "${TRN_PC_TO_PREFIX}")
# One module per library: trn, trn-ops (which requires trn) and trn-comm (which requires trn-ops).
foreach(module trn trn-ops trn-comm)
  configure_file(cmake/${module}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${module}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${module}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
