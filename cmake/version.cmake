# What `--version` prints: tpc's version, the git commit, and the MLIR, CUDA and NCCL versions the
# build found. The versions are read at configure time; the commit at every build, by a script that
# rewrites gen/tpc_version.h only when its text changes (so nothing recompiles when nothing did).
set(TPC_VERSION_STRING "0.1.0")

# LLVM_VERSION_STRING of the MLIR/LLVM installation tpc compiles against.
set(TPC_MLIR_VERSION_STRING "unknown")
if(EXISTS "${TPC_LLVM_ROOT}/include/llvm/Config/llvm-config.h")
  file(STRINGS "${TPC_LLVM_ROOT}/include/llvm/Config/llvm-config.h" _v REGEX "#define LLVM_VERSION_STRING ")
  string(REGEX REPLACE ".*\"(.*)\".*" "\\1" TPC_MLIR_VERSION_STRING "${_v}")
endif()

# CUDA runtime and NCCL headers of the CUDA backend plugin, when it is built.
set(TPC_CUDA_VERSIONS_STRING "not built (no nvcc or no NCCL)")
if(TPC_CUDA_BUILT)
  set(_cuda "?")
  set(_nccl "?")
  foreach(dir ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
    if(EXISTS "${dir}/cuda_runtime_api.h")
      file(STRINGS "${dir}/cuda_runtime_api.h" _v REGEX "#define CUDART_VERSION +[0-9]+")
      string(REGEX REPLACE ".*CUDART_VERSION +([0-9]+).*" "\\1" _n "${_v}")
      math(EXPR _major "${_n} / 1000")
      math(EXPR _minor "(${_n} % 1000) / 10")
      set(_cuda "${_major}.${_minor}")
    endif()
  endforeach()
  get_filename_component(_nccl_dir "${TPC_NCCL_LIB}" DIRECTORY)
  foreach(h ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES}/nccl.h ${_nccl_dir}/../include/nccl.h /usr/include/nccl.h)
    if(_nccl STREQUAL "?" AND EXISTS "${h}")
      file(STRINGS "${h}" _v REGEX "#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
      string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*NCCL_MINOR +([0-9]+).*NCCL_PATCH +([0-9]+).*" "\\1.\\2.\\3"
             _nccl "${_v}")
    endif()
  endforeach()
  set(TPC_CUDA_VERSIONS_STRING "CUDA ${_cuda}, NCCL ${_nccl}")
endif()

set(TPC_VERSION_HEADER "${CMAKE_BINARY_DIR}/gen/tpc_version.h")
add_custom_target(tpc_version
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DOUT=${TPC_VERSION_HEADER}
          -DVERSION=${TPC_VERSION_STRING} -DMLIR=${TPC_MLIR_VERSION_STRING} "-DCUDA=${TPC_CUDA_VERSIONS_STRING}"
          -P ${PROJECT_SOURCE_DIR}/cmake/version_header.cmake
  BYPRODUCTS ${TPC_VERSION_HEADER}
  COMMENT "" VERBATIM)
add_dependencies(tpc_cli tpc_version)
target_include_directories(tpc_cli PRIVATE ${CMAKE_BINARY_DIR}/gen)
