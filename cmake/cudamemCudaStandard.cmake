# SPDX-License-Identifier: MIT
# cudamem_require_cuda20(<target>): gives the .cu files of every consumer of <target> C++20, so that
# target_link_libraries(app PRIVATE cudamem::cudamem) is all a CUDA consumer writes.
#
# Why not target_compile_features(cuda_std_20): CMake learned nvcc's C++20 flag in 3.25.2, and on
# 3.25.0/3.25.1 that feature is an error, and CUDA_STANDARD 20 silently adds no flag at all (nvcc
# then compiles C++17). So the target adds -std=c++20 to CUDA sources itself:
#  - when the consuming target has no CUDA_STANDARD (CMake then adds no -std flag of its own);
#  - on CMake before 3.25.2 also when CUDA_STANDARD is 20 or later (CMake adds nothing there).
# A consumer that sets CUDA_STANDARD 17 explicitly keeps it (and gets cudamem's "needs C++20").
# Included by the top-level CMakeLists.txt (with BUILD_INTERFACE: the option is not exported to the
# install tree) and by the installed cudamemConfig.cmake, so the version check runs with the CMake
# of the consuming project.
function(cudamem_require_cuda20 target)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "BUILD_INTERFACE" "" "")
  get_target_property(_options ${target} INTERFACE_COMPILE_OPTIONS)
  if(_options AND "${_options}" MATCHES "cudamem-cuda20")
    return()  # already added (the build-tree package re-reads the target it exported)
  endif()
  set(_standard "$<TARGET_PROPERTY:CUDA_STANDARD>")
  set(_when "$<STREQUAL:${_standard},>")
  if(CMAKE_VERSION VERSION_LESS 3.25.2)
    set(_when "$<OR:${_when},$<STREQUAL:${_standard},20>,$<STREQUAL:${_standard},23>,$<STREQUAL:${_standard},26>>")
  endif()
  # The empty $<0:cudamem-cuda20> marks the option as ours without changing the command line.
  set(_option "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,${_when}>:-std=c++20>$<0:cudamem-cuda20>")
  if(_arg_BUILD_INTERFACE)
    set(_option "$<BUILD_INTERFACE:${_option}>")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_COMPILE_OPTIONS "${_option}")
endfunction()
