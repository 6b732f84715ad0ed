# Installation: `cmake --install build --prefix P` puts
#   P/bin                     tpc-opt, tpc-compile, tpc-run, tpc-train, tpc-generate
#   P/share/man/man1          their manual pages, generated from --help at build time
#   P/lib                     libtprt.so, and the CUDA backend plugin libtprt_backend_cuda.so where built
#   P/include/tprt            libtprt's public headers
#   P/lib/cmake/tprt          the CMake package: find_package(tprt) gives the target tprt::tprt
#   P/lib/pkgconfig/tprt.pc   `pkg-config --cflags --libs tprt`
# Every installed path is found relative to the file that names it ($ORIGIN in the tools'
# RUNPATH, ${pcfiledir} in tprt.pc, the config file's own directory in the CMake package), so the
# prefix given to `cmake --install` (not the one known at configure time) is the one that works.
# The directories are fixed, not GNUInstallDirs': tpc-run finds the plugin at ../lib next to
# itself. test/e2e/install.test installs a build and uses every piece from a C program.

# tprt's package version: tpc's version where cmake/version.cmake set it.
if(DEFINED TPC_VERSION_STRING)
  set(TPRT_PACKAGE_VERSION "${TPC_VERSION_STRING}")
else()
  set(TPRT_PACKAGE_VERSION "0.1.0")
endif()

# The tools find libtprt (and the plugin) in ../lib and libMLIR/libLLVM where tpc was built
# against them; the plugin finds libtprt beside itself.
set(TPC_INSTALLED_TOOLS tpc-opt tpc-compile tpc-run tpc-train tpc-generate)
set_target_properties(${TPC_INSTALLED_TOOLS} PROPERTIES INSTALL_RPATH "\$ORIGIN/../lib;${TPC_MLIR_LIB_DIR}")
install(TARGETS ${TPC_INSTALLED_TOOLS} RUNTIME DESTINATION bin)

# A manual page per tool from its --help (tools/scripts/help2man.sh), rewritten when the tool is.
set(TPC_MAN_PAGES)
foreach(tool ${TPC_INSTALLED_TOOLS})
  set(page "${CMAKE_BINARY_DIR}/man/man1/${tool}.1")
  add_custom_command(OUTPUT "${page}"
                     COMMAND ${CMAKE_COMMAND} -E make_directory "${CMAKE_BINARY_DIR}/man/man1"
                     COMMAND sh "${PROJECT_SOURCE_DIR}/tools/scripts/help2man.sh" "$<TARGET_FILE:${tool}>"
                             "${TPRT_PACKAGE_VERSION}" "${page}"
                     DEPENDS ${tool} "${PROJECT_SOURCE_DIR}/tools/scripts/help2man.sh"
                     COMMENT "Manual page ${tool}.1" VERBATIM)
  list(APPEND TPC_MAN_PAGES "${page}")
endforeach()
add_custom_target(tpc-man ALL DEPENDS ${TPC_MAN_PAGES})
install(FILES ${TPC_MAN_PAGES} DESTINATION share/man/man1)
install(TARGETS tprt LIBRARY DESTINATION lib)
if(TARGET tprt_backend_cuda)
  set_target_properties(tprt_backend_cuda PROPERTIES INSTALL_RPATH "\$ORIGIN")
  install(TARGETS tprt_backend_cuda LIBRARY DESTINATION lib)
endif()

# The public headers: what a C program needs to load a compiled module and run it on a world of
# ranks (module, exec, world, shard, status, allocator, tensor, dtype; the ABI they include), to
# read and write its arguments (safetensors, checkpoint, name rules), to run ranks as processes
# (procs), to plug in a device backend (backend, collectives) and to draw tpc-run's seeded
# arguments or call a reference kernel (tprt_cpu_kernels.h). The *_impl.h headers, tprt_params.h
# (environment knobs, read through the library) and the kernels' numerics headers stay inside.
set(TPRT_PUBLIC_HEADERS
    runtime/tprt_abi.h
    runtime/tprt_allocator.h
    runtime/tprt_backend.h
    runtime/tprt_checkpoint.h
    runtime/tprt_collectives.h
    runtime/tprt_dtype.h
    runtime/tprt_exec.h
    runtime/tprt_module.h
    runtime/tprt_name_rules.h
    runtime/tprt_ops_abi.h
    runtime/tprt_procs.h
    runtime/tprt_safetensors.h
    runtime/tprt_shard.h
    runtime/tprt_status.h
    runtime/tprt_tensor.h
    runtime/tprt_world.h
    kernels/cpu/tprt_cpu_kernels.h)
list(TRANSFORM TPRT_PUBLIC_HEADERS PREPEND "${PROJECT_SOURCE_DIR}/")
install(FILES ${TPRT_PUBLIC_HEADERS} DESTINATION include/tprt)

# The CMake package and the pkg-config file, written by hand rather than by install(EXPORT):
# libtprt's build interface names source directories, which an export may not carry.
set(TPRT_PACKAGE_DIR "${CMAKE_BINARY_DIR}/gen/package")
file(WRITE "${TPRT_PACKAGE_DIR}/tprtConfig.cmake" [=[
# tprt: the tpc runtime. Defines the imported target tprt::tprt (libtprt.so, its headers in
# <prefix>/include/tprt, and the system libraries it needs at link time).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
get_filename_component(_tprt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET tprt::tprt)
  add_library(tprt::tprt SHARED IMPORTED)
  set_target_properties(tprt::tprt PROPERTIES
    IMPORTED_LOCATION "${_tprt_prefix}/lib/libtprt.so"
    IMPORTED_SONAME "libtprt.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_tprt_prefix}/include/tprt"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;m;${CMAKE_DL_LIBS}")
endif()
unset(_tprt_prefix)
]=])
include(CMakePackageConfigHelpers)
write_basic_package_version_file("${TPRT_PACKAGE_DIR}/tprtConfigVersion.cmake" VERSION ${TPRT_PACKAGE_VERSION}
                                 COMPATIBILITY SameMinorVersion)
file(WRITE "${TPRT_PACKAGE_DIR}/tprt.pc" "\
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include/tprt

Name: tprt
Description: tpc runtime: loads and runs compiled tensor-parallel modules
Version: ${TPRT_PACKAGE_VERSION}
Cflags: -I\${includedir}
Libs: -L\${libdir} -ltprt
")
install(FILES "${TPRT_PACKAGE_DIR}/tprtConfig.cmake" "${TPRT_PACKAGE_DIR}/tprtConfigVersion.cmake"
        DESTINATION lib/cmake/tprt)
install(FILES "${TPRT_PACKAGE_DIR}/tprt.pc" DESTINATION lib/pkgconfig)
