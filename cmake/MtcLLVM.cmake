# LLVM/MLIR 22 for the compiler-side targets only (MTC_BUILD_COMPILER=ON).
#
# Finds MLIR (and with it LLVM), loads the CMake helpers the compiler's
# CMakeLists use (mlir_tablegen, add_mlir_doc, configure_lit_site_cfg,
# add_lit_testsuite) and defines MtcLLVM, an INTERFACE target carrying the
# shared libMLIR and libLLVM, their include directories (SYSTEM), LLVM's
# definitions and the compile and link flags of LLVM's HandleLLVMOptions.
#
# Only targets that include llvm/ or mlir/ headers link MtcLLVM (directly, or
# through MLIRMt, which links it PUBLIC). Nothing here touches the directory's
# include path, definitions or flags, so lib/ and runtime/ never see LLVM: an
# llvm/ or mlir/ header there does not compile, and the runtime-only build
# (MTC_BUILD_COMPILER=OFF) does not look for LLVM at all.

find_package(MLIR REQUIRED CONFIG)
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR
    "mtc needs LLVM/MLIR 22, found ${LLVM_PACKAGE_VERSION} at ${MLIR_DIR}")
endif()
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")
message(STATUS "Using LLVMConfig.cmake in: ${LLVM_DIR}")
list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)
# mlir_tablegen gives mlir-tblgen the directory's include path, which holds no
# LLVM or MLIR directory: name those (mlir/IR/OpBase.td, ...) to mlir-tblgen
# alone.
set(MTC_TABLEGEN_INCLUDE_DIRS ${MLIR_INCLUDE_DIRS} ${LLVM_INCLUDE_DIRS})
list(REMOVE_DUPLICATES MTC_TABLEGEN_INCLUDE_DIRS)
foreach(dir IN LISTS MTC_TABLEGEN_INCLUDE_DIRS)
  list(APPEND LLVM_TABLEGEN_FLAGS -I ${dir})
endforeach()

# mtc_llvm_flags_to(TARGET): HandleLLVMOptions appends LLVM's flags to
# CMAKE_<LANG>_FLAGS and to the directory's properties, which would reach every
# target. It runs here in a function scope instead (its variables stay in the
# function); what it adds is moved onto TARGET's INTERFACE and the directory's
# properties are put back as they were.
function(mtc_llvm_flags_to target)
  set(flag_vars CMAKE_C_FLAGS CMAKE_CXX_FLAGS CMAKE_EXE_LINKER_FLAGS)
  set(untouched_vars CMAKE_C_FLAGS_${CMAKE_BUILD_TYPE}
    CMAKE_CXX_FLAGS_${CMAKE_BUILD_TYPE} CMAKE_EXE_LINKER_FLAGS_${CMAKE_BUILD_TYPE})
  string(TOUPPER "${untouched_vars}" untouched_vars)
  set(dir_props COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES
    LINK_OPTIONS LINK_DIRECTORIES)
  foreach(v IN LISTS flag_vars untouched_vars)
    set(before_${v} "${${v}}")
  endforeach()
  foreach(p IN LISTS dir_props)
    get_directory_property(before_${p} ${p})
  endforeach()

  include(HandleLLVMOptions)

  foreach(v IN LISTS untouched_vars)
    if(NOT "${${v}}" STREQUAL "${before_${v}}")
      message(FATAL_ERROR "HandleLLVMOptions changed ${v}; "
        "cmake/MtcLLVM.cmake does not move that onto ${target}")
    endif()
  endforeach()
  # Flags added to a CMAKE_*_FLAGS string (HandleLLVMOptions only appends).
  foreach(v IN LISTS flag_vars)
    string(LENGTH "${before_${v}}" n)
    string(SUBSTRING "${${v}}" 0 ${n} head)
    if(NOT head STREQUAL "${before_${v}}")
      message(FATAL_ERROR "HandleLLVMOptions rewrote ${v}; "
        "cmake/MtcLLVM.cmake only moves appended flags onto ${target}")
    endif()
    string(SUBSTRING "${${v}}" ${n} -1 tail)
    separate_arguments(added_${v} UNIX_COMMAND "${tail}")
  endforeach()
  target_compile_options(${target} INTERFACE
    "$<$<COMPILE_LANGUAGE:C>:${added_CMAKE_C_FLAGS}>"
    "$<$<COMPILE_LANGUAGE:CXX>:${added_CMAKE_CXX_FLAGS}>")
  # mtc builds static libraries and executables only: the executables' link
  # flags are the ones that matter.
  target_link_options(${target} INTERFACE ${added_CMAKE_EXE_LINKER_FLAGS})

  # Definitions and options added to the directory's properties.
  foreach(p IN LISTS dir_props)
    get_directory_property(after ${p})
    set(added_${p} "${after}")
    if(before_${p})
      list(REMOVE_ITEM added_${p} ${before_${p}})
    endif()
    set_directory_properties(PROPERTIES ${p} "${before_${p}}")
  endforeach()
  target_compile_definitions(${target} INTERFACE ${added_COMPILE_DEFINITIONS})
  target_compile_options(${target} INTERFACE ${added_COMPILE_OPTIONS})
  target_include_directories(${target} SYSTEM INTERFACE
    ${added_INCLUDE_DIRECTORIES})
  target_link_options(${target} INTERFACE ${added_LINK_OPTIONS})
  target_link_directories(${target} INTERFACE ${added_LINK_DIRECTORIES})
endfunction()

add_library(MtcLLVM INTERFACE)
target_include_directories(MtcLLVM SYSTEM INTERFACE
  ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
separate_arguments(MTC_LLVM_DEFINITIONS UNIX_COMMAND "${LLVM_DEFINITIONS}")
target_compile_definitions(MtcLLVM INTERFACE ${MTC_LLVM_DEFINITIONS})
target_link_libraries(MtcLLVM INTERFACE MLIR LLVM)
mtc_llvm_flags_to(MtcLLVM)
