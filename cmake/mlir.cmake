# Locates MLIR/LLVM 22 and defines the imported target tpc::mlir.
#
# We link the static C API archives (libMLIRCAPI*.a) on top of the shared libMLIR.so and
# libLLVM.so, never the static C++ MLIR libraries: links stay fast and binaries small.
set(TPC_MLIR_INCLUDE_DIR "${TPC_LLVM_ROOT}/include")
set(TPC_MLIR_LIB_DIR "${TPC_LLVM_ROOT}/lib")
if(NOT EXISTS "${TPC_MLIR_INCLUDE_DIR}/mlir-c/IR.h" OR NOT EXISTS "${TPC_MLIR_LIB_DIR}/libMLIR.so")
  message(FATAL_ERROR
    "MLIR 22 not found under ${TPC_LLVM_ROOT}. Run tools/setup.sh "
    "(it installs libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools).")
endif()

# The C API archives tpc uses. RegisterEverything lets user input mix any upstream dialect
# with `tp`; its code lives in libMLIR.so, so it costs nothing at link time.
set(TPC_MLIR_CAPI_COMPONENTS
    RegisterEverything IR IRDL Func Arith Tensor Transforms Conversion Interfaces Target)
set(TPC_MLIR_CAPI_ARCHIVES "")
foreach(c ${TPC_MLIR_CAPI_COMPONENTS})
  list(APPEND TPC_MLIR_CAPI_ARCHIVES "${TPC_MLIR_LIB_DIR}/libMLIRCAPI${c}.a")
endforeach()

add_library(tpc_mlir INTERFACE)
add_library(tpc::mlir ALIAS tpc_mlir)
target_include_directories(tpc_mlir SYSTEM INTERFACE "${TPC_MLIR_INCLUDE_DIR}")
# The archives reference each other, so they are grouped for the single-pass GNU linker.
target_link_libraries(tpc_mlir INTERFACE
  -Wl,--start-group ${TPC_MLIR_CAPI_ARCHIVES} -Wl,--end-group
  "${TPC_MLIR_LIB_DIR}/libMLIR.so" "${TPC_MLIR_LIB_DIR}/libLLVM.so" stdc++ m)
set_property(TARGET tpc_mlir APPEND PROPERTY INTERFACE_LINK_OPTIONS
             "-Wl,-rpath,${TPC_MLIR_LIB_DIR}")

set(TPC_LIT "${TPC_LLVM_ROOT}/bin/lit" CACHE FILEPATH "lit")
set(TPC_FILECHECK "${TPC_LLVM_ROOT}/bin/FileCheck" CACHE FILEPATH "FileCheck")
set(TPC_MLIR_OPT "${TPC_LLVM_ROOT}/bin/mlir-opt" CACHE FILEPATH "mlir-opt")

# tpc_embed_file(<var> <input> <output.c> <symbol>): turns a file into a C string at build time.
function(tpc_embed_file input output symbol)
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -DIN=${input} -DOUT=${output} -DSYM=${symbol}
            -P "${PROJECT_SOURCE_DIR}/cmake/embed.cmake"
    DEPENDS "${input}" "${PROJECT_SOURCE_DIR}/cmake/embed.cmake"
    COMMENT "Embedding ${input}")
endfunction()
