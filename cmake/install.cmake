# `cmake --install build --prefix P`: the public headers, every layer as a
# static library (the runtime's layers usable alone, without the compiler
# side), the C API as a shared library (libqemb.so, qemb::c), the qemb binary, a CMake package (find_package(qemb CONFIG) with
# qemb::runtime and qemb::compiler) and qemb.pc for pkg-config.
include(CMakePackageConfigHelpers)

set(QEMB_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/qemb CACHE STRING "Where qembConfig.cmake is installed")
set(qemb_installed_layers core artifact kernels runtime io quant sdk lowering passes compiler eval)
foreach(layer ${qemb_installed_layers})
  set_target_properties(qemb_${layer} PROPERTIES EXPORT_NAME ${layer})
endforeach()
set_target_properties(qemb_xxhash PROPERTIES EXPORT_NAME xxhash)
list(TRANSFORM qemb_installed_layers PREPEND qemb_ OUTPUT_VARIABLE qemb_installed_targets)

install(TARGETS ${qemb_installed_targets} qemb_xxhash EXPORT qembTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS qemb_c EXPORT qembTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development)
install(TARGETS qemb RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/qemb DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(FILES ${QEMB_GENERATED_INCLUDE_DIR}/qemb/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qemb)
install(EXPORT qembTargets NAMESPACE qemb:: DESTINATION ${QEMB_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/qembConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/qembConfig.cmake
                              INSTALL_DESTINATION ${QEMB_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/qembConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/qembConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/qembConfigVersion.cmake
        DESTINATION ${QEMB_INSTALL_CMAKEDIR})
# Relocatable: the prefix is found from the .pc file's own folder.
file(RELATIVE_PATH QEMB_PC_PREFIX_REL /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(cmake/qemb.pc.in ${CMAKE_CURRENT_BINARY_DIR}/qemb.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/qemb.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
