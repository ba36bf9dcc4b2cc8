# Sanitizers (docs/testing.md, "Sanitised runs").
#
# MTC_SANITIZE is a -fsanitize= list (e.g. address,undefined); every report
# ends the process (-fno-sanitize-recover=all). MTC_SANITIZE_DIRS names the
# top-level source folders whose targets are instrumented (e.g.
# "lib;runtime;tools"); empty instruments every target. Every executable and
# shared library links the sanitizer runtimes either way, so that instrumented
# static libraries can be linked into any of them.
#
# With MTC_SANITIZE_DIRS, the other targets keep the flags of an ordinary
# build, so ccache serves their objects from build/ (the compiler side:
# dialects/, compiler/, frontend/ with its generated parser), and only the
# chosen folders compile again, at -O0 with line tables for the reports.
# The prebuilt LLVM/MLIR libraries are never instrumented and have no RTTI,
# so the vptr check (which needs RTTI on both sides) is left out.

set(MTC_SANITIZE "" CACHE STRING
  "Comma-separated -fsanitize= list (\"\": none), e.g. address,undefined")
set(MTC_SANITIZE_DIRS "" CACHE STRING
  "Top-level source folders whose targets MTC_SANITIZE instruments (\"\": every target), e.g. lib;runtime;tools")
# The library kernels' emulator builds (--device cuda-emu) are left out of
# MTC_SANITIZE_DIRS' targets: mtc-cuda-tests-asan (test/cuda) runs every one
# of them under ASan + UBSan already, and instrumenting them again is the
# slowest compile of the tree (attention.cu alone, minutes).
set(MTC_SANITIZE_EXCLUDE "MtcCudaEmuLibraryKernels" CACHE STRING
  "Targets inside MTC_SANITIZE_DIRS that keep the ordinary flags")

set(MTC_SANITIZE_COMPILE_FLAGS)
if(MTC_SANITIZE)
  set(MTC_SANITIZE_COMPILE_FLAGS -fsanitize=${MTC_SANITIZE}
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
  if(MTC_SANITIZE MATCHES "undefined")
    list(APPEND MTC_SANITIZE_COMPILE_FLAGS -fno-sanitize=vptr)
  endif()
  add_link_options(-fsanitize=${MTC_SANITIZE})
  if(MTC_SANITIZE_DIRS)
    message(STATUS "MTC_SANITIZE=${MTC_SANITIZE} instruments the targets of: ${MTC_SANITIZE_DIRS}")
  else()
    add_compile_options(${MTC_SANITIZE_COMPILE_FLAGS} -g)
    message(STATUS "MTC_SANITIZE=${MTC_SANITIZE} instruments every target")
  endif()
endif()

# Instruments the targets of \p dir when it is one of MTC_SANITIZE_DIRS or
# below one, then goes on with the folders added from \p dir.
function(mtc_sanitize_walk dir)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
  set(chosen OFF)
  foreach(want IN LISTS MTC_SANITIZE_DIRS)
    if(rel STREQUAL want OR rel MATCHES "^${want}/")
      set(chosen ON)
    endif()
  endforeach()
  if(chosen)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t IN LISTS targets)
      get_target_property(type ${t} TYPE)
      if(t IN_LIST MTC_SANITIZE_EXCLUDE)
        continue()
      endif()
      if(type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$")
        target_compile_options(${t} PRIVATE ${MTC_SANITIZE_COMPILE_FLAGS}
          -O0 -gline-tables-only)
      endif()
    endforeach()
  endif()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    mtc_sanitize_walk(${sub})
  endforeach()
endfunction()

# Called at the end of the top-level CMakeLists.txt, once every folder has
# been added: instruments the targets of MTC_SANITIZE_DIRS.
function(mtc_sanitize_chosen_dirs)
  if(NOT MTC_SANITIZE OR NOT MTC_SANITIZE_DIRS)
    return()
  endif()
  foreach(dir IN LISTS MTC_SANITIZE_DIRS)
    if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/${dir})
      message(FATAL_ERROR
        "MTC_SANITIZE_DIRS: no folder '${dir}' in ${PROJECT_SOURCE_DIR}")
    endif()
  endforeach()
  mtc_sanitize_walk(${PROJECT_SOURCE_DIR})
endfunction()
